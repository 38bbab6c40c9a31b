"""The extender's verbs on the live side (scheduling queue, cluster cache, binder) over a fake API
server: filter and prioritize with the standalone scheduler's plugins, bind with its signed
assignment, preempt; pods without the kit's resources passing through; and the races of a bind (a
pod deleted, a node gone, two binds for the last GPU, a pod bound twice)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.model import MigMode
from runtimekit.model.authority import signing_message
from runtimekit.scheduler.extender.service import UNKNOWN_NODE
from runtimekit.scheduler.extender.wire import MetaVictims, PreemptionArgs
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.info import TaskInfo
from scheduler.extender.harness import Extender, gpu_node, kit_pod
from scheduler.fake_api import FakeApi, P

RES = P.resources


@pytest.fixture
def ext() -> Extender:
    return Extender([gpu_node("n1"), gpu_node("n2"), gpu_node("n3")])


def share(name: str, percent: int = 50, gib: int = 8, **options: Any) -> dict[str, Any]:
    return kit_pod(name, {RES.core: percent, RES.memory: gib}, **options)


def whole(name: str, count: int) -> dict[str, Any]:
    return kit_pod(name, {RES.gpu: count})


# -- filter ----------------------------------------------------------------------------------------
def test_filter_passes_the_nodes_with_room_and_gives_a_reason_for_the_others(ext: Extender) -> None:
    for i in range(4):
        assert ext.verbs.bind(ext.bind_args(ext.add_pod(whole(f"w{i}", 1)), "n1")) is None
    pod = ext.add_pod(whole("p", 1))
    answer = ext.verbs.filter(ext.args(pod, ["n1", "n2", "n3", "gone"]))
    assert answer.passed == ("n2", "n3")
    assert answer.failed == {"n1": "gpushare: too few whole free GPUs", "gone": UNKNOWN_NODE}
    assert answer.unresolvable == {}
    assert answer.error == ""


def test_nodes_no_eviction_helps_are_unresolvable(ext: Extender) -> None:
    ext.add_node(gpu_node("small", gpus=2))
    answer = ext.verbs.filter(ext.args(ext.add_pod(whole("p", 4))))
    assert answer.passed == ("n1", "n2", "n3")
    assert set(answer.unresolvable) == {"small"}
    models = ext.add_pod(share("m", annotations={P.annotations.gpu_models: "A100-80GB"}))
    answer = ext.verbs.filter(ext.args(models))
    assert answer.passed == ()
    assert set(answer.unresolvable) == {"n1", "n2", "n3", "small"}
    assert all("GPU model" in why for why in answer.unresolvable.values())


def test_an_invalid_request_fails_every_node_for_its_reason(ext: Extender) -> None:
    bad = ext.add_pod(kit_pod("bad", {RES.core: 150}))
    answer = ext.verbs.filter(ext.args(bad))
    assert answer.passed == ()
    assert set(answer.unresolvable) == {"n1", "n2", "n3"}
    assert "invalid request" in answer.unresolvable["n1"]


def test_a_pod_without_the_kits_resources_passes_through(ext: Extender) -> None:
    plain = ext.add_pod(kit_pod("plain", {"example.com/foo": 1}))
    args = ext.args(plain, ["n1", "not-a-node"])
    assert ext.verbs.filter(args).passed == ("n1", "not-a-node")
    assert list(ext.verbs.prioritize(args)) == [("n1", 0), ("not-a-node", 0)]
    victims = {"n1": MetaVictims(("u",), 1)}
    assert ext.verbs.preempt(PreemptionArgs(plain, victims)) == victims


def test_filter_reads_the_cache_without_changing_it(ext: Extender) -> None:
    before = ext.live.cache.recompute().table.version.copy()
    ext.verbs.filter(ext.args(ext.add_pod(share("p"))))
    ext.verbs.prioritize(ext.args(ext.add_pod(share("q"))))
    assert (ext.live.cache.ledger.table.version == before).all()
    assert ext.live.cache.ledger.bookings() == {}


# -- prioritize --------------------------------------------------------------------------------------
def test_prioritize_scores_0_to_10_with_one_first_choice_and_0_for_nodes_that_do_not_fit(ext: Extender) -> None:
    assert ext.verbs.bind(ext.bind_args(ext.add_pod(share("a", 50)), "n2")) is None
    for i in range(4):
        ext.verbs.bind(ext.bind_args(ext.add_pod(whole(f"w{i}", 1)), "n3"))
    scores = dict(ext.verbs.prioritize(ext.args(ext.add_pod(share("p", 50)), ["n1", "n2", "n3", "gone"])))
    assert scores["n2"] == 10  # the half-used GPU: packed, as the standalone scheduler packs
    assert scores["n3"] == scores["gone"] == 0
    assert 0 <= scores["n1"] <= 9


# -- bind --------------------------------------------------------------------------------------------
def test_bind_writes_the_signed_assignment_the_standalone_scheduler_writes() -> None:
    class Signer:
        def sign(self, message: bytes) -> str:
            return f"signed:{len(message)}"

    ext = Extender([gpu_node("n1")], signer=Signer())
    pod = ext.add_pod(share("p", 30, 10))
    assert ext.verbs.bind(ext.bind_args(pod, "n1")) is None
    stored = ext.api.pods["default/p"]
    notes = stored["metadata"]["annotations"]
    assignment = notes[P.annotations.assignment]
    assert '"coreMilli":300' in assignment
    assert '"memoryMiB":10240' in assignment
    assert notes[P.annotations.assignment_signature] == Signer().sign(
        signing_message(stored["metadata"]["uid"], assignment)
    )
    assert P.annotations.assume_time in notes
    assert stored["spec"]["nodeName"] == "n1"


def test_a_bind_asked_again_for_the_same_node_succeeds_and_for_another_is_refused(ext: Extender) -> None:
    pod = ext.add_pod(share("p"))
    assert ext.verbs.bind(ext.bind_args(pod, "n1")) is None
    assert ext.verbs.bind(ext.bind_args(pod, "n1")) is None
    assert ext.verbs.bind(ext.bind_args(pod, "n2")) == "pod default/p is already bound to node n1"


def test_a_pod_deleted_before_its_bind_is_refused(ext: Extender) -> None:
    pod = ext.add_pod(share("p"))
    ext.api.delete_pod("default/p")
    assert "not found" in str(ext.verbs.bind(ext.bind_args(pod, "n1")))
    assert ext.live.cache.ledger.bookings() == {}


class DeletedWhileBinding(FakeApi):
    """The pod's DELETED event arrives while its Binding is posted; the API server then has no such pod."""

    def bind(
        self, task: TaskInfo, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        self.delete_pod(f"{task.namespace}/{task.name}")
        super().bind(task, node, annotations, labels)


def test_a_pod_deleted_while_it_binds_gives_its_booking_back() -> None:
    ext = Extender([gpu_node("n1")], api=DeletedWhileBinding())
    pod = ext.add_pod(share("p"))
    assert ext.verbs.bind(ext.bind_args(pod, "n1")) == "pod not found"
    assert ext.live.cache.ledger.bookings() == {}
    assert not ext.live.cache.assumed


def test_a_pod_recreated_under_its_name_is_not_bound_by_its_old_uid(ext: Extender) -> None:
    pod = ext.add_pod(share("p"))
    ext.api.delete_pod("default/p")
    ext.add_pod(share("p"))
    error = ext.verbs.bind(ext.bind_args(pod, "n1"))
    assert "deleted and created again" in str(error)


def test_a_node_gone_between_filter_and_bind_refuses_the_bind(ext: Extender) -> None:
    pod = ext.add_pod(share("p"))
    assert "n2" in ext.verbs.filter(ext.args(pod)).passed
    ext.remove_node("n2")
    error = ext.verbs.bind(ext.bind_args(pod, "n2"))
    assert error == f"node n2: {UNKNOWN_NODE}"
    assert ext.live.cache.ledger.bookings() == {}
    assert ext.verbs.bind(ext.bind_args(pod, "n1")) is None  # kube-scheduler's next attempt


def test_a_node_that_filled_up_between_filter_and_bind_refuses_the_bind(ext: Extender) -> None:
    late = ext.add_pod(whole("late", 4))
    assert "n1" in ext.verbs.filter(ext.args(late)).passed
    assert ext.verbs.bind(ext.bind_args(ext.add_pod(share("early")), "n1")) is None
    assert (
        ext.verbs.bind(ext.bind_args(late, "n1")) == "pod no longer fits on node n1: gpushare: too few whole free GPUs"
    )


def test_two_binds_racing_for_the_last_gpu_book_it_once() -> None:
    ext = Extender([gpu_node("n1", gpus=1)])
    pods = [ext.add_pod(whole(f"w{i}", 1)) for i in range(8)]
    errors: list[str | None] = [None] * len(pods)
    go = threading.Barrier(len(pods))

    def bind(i: int) -> None:
        go.wait()
        errors[i] = ext.verbs.bind(ext.bind_args(pods[i], "n1"))

    threads = [threading.Thread(target=bind, args=(i,)) for i in range(len(pods))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors.count(None) == 1
    assert sum(1 for p in ext.api.pods.values() if p["spec"].get("nodeName")) == 1
    assert len(ext.live.cache.ledger.bookings()) == 1


def test_a_pod_of_another_scheduler_is_not_bound(ext: Extender) -> None:
    pod = ext.add_pod(share("p", scheduler="someone-else"))
    assert "schedulerName is none of" in str(ext.verbs.bind(ext.bind_args(pod, "n1")))


def test_a_bind_waits_a_little_for_a_pod_the_informer_has_not_shown_yet(ext: Extender) -> None:
    pod = share("p")
    later = threading.Timer(0.02, ext.add_pod, (pod,))
    ext.verbs.bind_wait = 2.0
    later.start()
    assert ext.verbs.bind(ext.bind_args(cast(Pod, pod), "n1")) is None
    later.join()


def test_mig_slices_are_bound_on_mig_gpus() -> None:
    ext = Extender([gpu_node("plain"), gpu_node("mig", gpus=2, model="A100-80GB", mig=MigMode.DYNAMIC)])
    pod = ext.add_pod(kit_pod("slice", {"aliyun.com/mig-3g.40gb": 1}))
    answer = ext.verbs.filter(ext.args(pod))
    assert answer.passed == ("mig",)
    assert ext.schedule(pod) == "mig"
    assert '"migProfile":"3g.40gb"' in ext.assignment(pod)


# -- preempt -----------------------------------------------------------------------------------------
def test_preempt_keeps_the_nodes_where_evicting_the_victims_makes_room(ext: Extender) -> None:
    victims: dict[str, MetaVictims] = {}
    for node in ("n1", "n2"):
        uids = []
        for i in range(4):
            pod = ext.add_pod(whole(f"{node}-{i}", 1))
            assert ext.verbs.bind(ext.bind_args(pod, node)) is None
            uids.append(str(pod["metadata"]["uid"]))
        victims[node] = MetaVictims(tuple(uids[: 2 if node == "n1" else 1]), 0)
    big = ext.add_pod(whole("big", 2))
    kept = ext.verbs.preempt(PreemptionArgs(big, {**victims, "gone": MetaVictims(("x",), 0)}))
    assert kept == {"n1": victims["n1"]}  # n2 frees one GPU of the two asked; "gone" is not known
    assert len(ext.live.cache.ledger.bookings()) == 8  # nothing was evicted or given back
    assert ext.live.cache.recompute().table.version.tolist() == ext.live.cache.ledger.table.version.tolist()


def test_the_conf_may_name_the_seed_designs_plugins() -> None:
    from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework

    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: StandardPlugin\n  - name: MigPlugin\n'
    ext = Extender([gpu_node("n1")], build_framework(FrameworkConfig(parse_conf(conf))))
    assert ext.schedule(ext.add_pod(share("p"))) == "n1"
