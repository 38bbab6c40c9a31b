"""The live cache against a fake API server: bookings follow pods, restarts rebuild exactly what is
booked, failed binds give their booking back, and random create/delete/fail sequences never leave
the ledger different from a recomputation from the pod objects."""

from __future__ import annotations

import copy
import random
import time
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from runtimekit.model import Ledger, NodeName, Placement, placement_from_assignment
from runtimekit.scheduler import binder
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.cache.objects import assignment_of, node_state, task_from_pod
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf, parse_conf
from runtimekit.scheduler.framework.info import TaskStatus
from scheduler.fake_api import FakeApi, P, node_object, pod_object

GPU, CORE, MEM = P.resources.gpu, P.resources.core, P.resources.memory


def make(api: FakeApi, conf: str | None = None) -> tuple[LiveCache, Framework]:
    live = live_cache(P, P.scheduler_name, api, bind_workers=2, retry_seconds=0.0)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    for pod in api.pods.values():
        live.cache.on_pod("ADDED", pod)
    framework = Framework(load_conf(conf), builtin_registry(), BuildContext(protocol=P))
    return live, framework


def schedule(live: LiveCache, framework: Framework, sessions: int = 2) -> None:
    for _ in range(sessions):
        framework.run_once(live)
        assert live.binder.drain()


def expected(api: FakeApi) -> Ledger:
    """The ledger a scheduler must hold, computed from the API objects alone."""
    nodes = [node_state(n, P) for n in api.nodes.values()]
    by_name = {s.meta.name: s for s in nodes}
    pods = []
    for pod in api.pods.values():
        node = pod["spec"].get("nodeName")
        if not node or pod["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        task = task_from_pod(pod, P)
        assignment = assignment_of(pod, P)
        if assignment is not None:
            placement = placement_from_assignment(
                assignment, by_name[node].inventory, task.request.cpu_milli, task.request.memory_bytes
            )
        else:
            placement = Placement(NodeName(node), task.request.cpu_milli, task.request.memory_bytes)
        pods.append((task.key, placement))
    ledger, conflicts = Ledger.rebuild(((s.inventory, s.capacity) for s in nodes), pods)
    assert conflicts == [], conflicts
    return ledger


def same(a: Ledger, b: Ledger) -> None:
    assert sorted(a.table.node_names()) == sorted(b.table.node_names())
    for node in a.table.node_names():
        assert a.table.free_gpus(node) == b.table.free_gpus(node), node
        ra, rb = a.table.row(node), b.table.row(node)
        assert (a.table.cpu_free[ra], a.table.pods_free[ra]) == (b.table.cpu_free[rb], b.table.pods_free[rb]), node
    assert set(a.bookings()) == set(b.bookings())


def test_pods_are_bound_with_an_assignment_and_booked() -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, framework = make(api)
    api.add_pod(pod_object("share", {CORE: 30, MEM: 4}))
    api.add_pod(pod_object("whole", {GPU: 1}))
    schedule(live, framework)
    share, whole = api.pods["default/share"], api.pods["default/whole"]
    assert share["spec"]["nodeName"] == whole["spec"]["nodeName"] == "n1"
    assignment = assignment_of(share, P)
    assert assignment is not None
    (gpu,) = assignment.containers["main"]
    assert (gpu.core_milli, gpu.memory_mib) == (300, 4096)
    assert P.annotations.assume_time in share["metadata"]["annotations"]
    same(live.cache.ledger, expected(api))
    assert [e[1] for e in api.events] == ["Scheduled", "Scheduled"]


class JitteryApi(FakeApi):
    """Binds take a random while, so unordered workers would finish them out of order; records the
    order in which each node's bindings reach the API server."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(5)
        self.bound: dict[str, list[int]] = {}  # node -> assume times, in binding order

    def bind(self, task: Any, node: str, annotations: Any, labels: Any = None) -> None:
        time.sleep(self.rng.random() * 0.01)
        with self.lock:
            self.bound.setdefault(node, []).append(int(annotations[P.annotations.assume_time]))
        super().bind(task, node, annotations, labels)


def test_a_nodes_pods_are_bound_in_the_order_they_were_assumed() -> None:
    api = JitteryApi()
    for name in ("n1", "n2"):
        api.add_node(node_object(name, gpus=4))
    live = live_cache(P, P.scheduler_name, api, bind_workers=8, retry_seconds=0.0)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    framework = Framework(load_conf(None), builtin_registry(), BuildContext(protocol=P))
    for i in range(40):
        api.add_pod(pod_object(f"p{i:02d}", {CORE: 15, MEM: 1}))
    schedule(live, framework)
    assert live.binder.drain()
    assert sum(len(times) for times in api.bound.values()) == 40
    for node, times in api.bound.items():
        assert times == sorted(times), f"{node}: bound out of assume order"
    live.binder.close()


def test_a_restarted_scheduler_books_exactly_what_is_bound() -> None:
    api = FakeApi()
    for name in ("n1", "n2"):
        api.add_node(node_object(name))
    live, framework = make(api)
    for i in range(6):
        api.add_pod(pod_object(f"p{i}", {CORE: 40, MEM: 2}))
    schedule(live, framework)
    live.binder.close()
    # a new scheduler sees the pods before the nodes, as an informer race may deliver them
    restarted = live_cache(P, P.scheduler_name, api)
    api.attach(restarted.cache)
    for pod in api.pods.values():
        restarted.cache.on_pod("ADDED", pod)
    for node in api.nodes.values():
        restarted.cache.on_node("ADDED", node)
    same(restarted.cache.ledger, expected(api))
    assert not restarted.queue.pending


def test_a_failed_bind_gives_its_booking_back_and_is_retried() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=1))
    live, framework = make(api)
    api.fail_next_binds = 1
    api.add_pod(pod_object("p", {GPU: 1}))
    framework.run_once(live)
    assert live.binder.drain()
    assert live.cache.ledger.bookings() == {}
    assert "binding rejected" in api.events[-1][2]
    entry = live.queue.pending[next(iter(live.queue.pending))]
    entry.not_before = 0.0  # skip the backoff
    schedule(live, framework, 1)
    assert api.pods["default/p"]["spec"]["nodeName"] == "n1"
    same(live.cache.ledger, expected(api))


def test_unschedulable_pods_get_a_reason_and_wait_for_a_change() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=1))
    live, framework = make(api)
    live.queue.retry_seconds = 3600
    api.add_pod(pod_object("big", {GPU: 2}))
    schedule(live, framework, 1)
    assert api.events[-1][1] == "FailedScheduling"
    assert api.events[-1][2] == "0/1 nodes are available: 1 too few whole free GPUs."
    assert not live.queue.has_work()  # nothing changed: no busy loop
    api.add_node(node_object("n2", gpus=2))
    assert live.queue.has_work()
    schedule(live, framework, 1)
    assert api.pods["default/big"]["spec"]["nodeName"] == "n2"


def test_pods_of_other_schedulers_hold_resources_but_are_not_scheduled() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=1))
    pending_other = pod_object("waiting", {}, cpu="1", scheduler="default-scheduler")
    other = pod_object("other", {}, cpu="30", scheduler="default-scheduler")
    other["spec"]["nodeName"] = "n1"
    api.add_pod(pending_other)
    api.add_pod(other)
    live, framework = make(api)
    api.add_pod(pod_object("mine", {CORE: 10}, cpu="4"))
    schedule(live, framework, 1)
    assert "nodeName" not in pending_other["spec"]  # not ours to schedule
    assert "nodeName" not in api.pods["default/mine"]["spec"]  # 30 + 4 CPUs do not fit 32
    api.delete_pod("default/other")
    schedule(live, framework, 1)
    assert api.pods["default/mine"]["spec"]["nodeName"] == "n1"


def test_a_restarted_scheduler_books_the_extended_resources_of_running_pods() -> None:
    api = FakeApi()
    node = node_object("n1")
    node["status"]["allocatable"]["example.com/foo"] = "3"
    api.add_node(node)
    running = pod_object("running", {"example.com/foo": 2})
    running["spec"]["nodeName"] = "n1"
    api.add_pod(running)
    live, framework = make(api)
    live.queue.retry_seconds = 3600
    api.add_pod(pod_object("waiting", {"example.com/foo": 2}))
    schedule(live, framework, 1)
    assert "nodeName" not in api.pods["default/waiting"]["spec"]
    assert api.events[-1][2] == "0/1 nodes are available: 1 Insufficient example.com/foo."
    api.delete_pod("default/running")
    schedule(live, framework, 1)
    assert api.pods["default/waiting"]["spec"]["nodeName"] == "n1"


def test_a_pod_failed_by_an_error_is_retried_after_a_growing_back_off() -> None:
    """kube-scheduler's back-off queue: an error (not a misfit) retries after 1 s, then 2 s, ...
    up to 10 s, whether or not anything changes; a misfit waits for a change."""
    now = [1000.0]
    api = FakeApi()
    api.add_node(node_object("n1"))
    live = live_cache(P, P.scheduler_name, api, clock=lambda: now[0], retry_seconds=3600)
    api.attach(live.cache)
    live.cache.on_node("ADDED", api.nodes["n1"])
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n'  # no plugin allocates GPUs
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext(protocol=P))
    api.add_pod(pod_object("p", {GPU: 1}))
    for wait in (1.0, 2.0, 4.0, 8.0, 10.0, 10.0):
        framework.run_once(live)
        assert "no plugin allocates" in api.events[-1][2]
        now[0] += wait - 0.01
        assert not live.queue.has_work()
        now[0] += 0.01
        assert live.queue.has_work()


class LiveCacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.api = FakeApi()
        for name, gpus in (("n1", 2), ("n2", 4), ("n3", 1)):
            self.api.add_node(node_object(name, gpus, cpu="16"))
        self.live, self.framework = make(self.api)
        self.count = 0

    @rule(kind=st.sampled_from(["share", "share-mem", "whole", "two", "cpu"]), cpu=st.sampled_from(["1", "4", "10"]))
    def create(self, kind: str, cpu: str) -> None:
        limits: dict[str, Any] = {
            "share": {CORE: 35},
            "share-mem": {CORE: 20, MEM: 6},
            "whole": {GPU: 1},
            "two": {GPU: 2},
            "cpu": {},
        }[kind]
        self.count += 1
        self.api.add_pod(pod_object(f"p{self.count}", limits, cpu=cpu))

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if self.api.pods:
            self.api.delete_pod(data.draw(st.sampled_from(sorted(self.api.pods))))

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        bound = sorted(k for k, p in self.api.pods.items() if p["spec"].get("nodeName"))
        if bound:
            self.api.finish_pod(data.draw(st.sampled_from(bound)))

    @rule(failures=st.integers(0, 2))
    def session(self, failures: int) -> None:
        self.api.fail_next_binds = failures
        for entry in self.live.queue.pending.values():
            entry.not_before = 0.0
        self.framework.run_once(self.live)
        assert self.live.binder.drain()

    @rule(seed=st.integers(0, 100))
    def restart(self, seed: int) -> None:
        self.live.binder.close()
        self.live = live_cache(P, P.scheduler_name, self.api, bind_workers=2, retry_seconds=0.0)
        self.api.attach(self.live.cache)
        events = [("node", n) for n in self.api.nodes.values()] + [("pod", p) for p in self.api.pods.values()]
        random.Random(seed).shuffle(events)
        for kind, obj in events:
            (self.live.cache.on_node if kind == "node" else self.live.cache.on_pod)("ADDED", obj)

    @invariant()
    def ledger_matches_the_pods(self) -> None:
        same(self.live.cache.ledger, expected(self.api))

    @invariant()
    def pod_book_follows_the_bookings(self) -> None:
        """What inter-pod affinity sees on nodes is exactly what holds resources there."""
        book = self.live.cache.pods.frozen().pods
        bookings = self.live.cache.ledger.bookings()
        assert set(book) == set(bookings)
        assert {k: node for k, (_, node) in book.items()} == {k: p.node for k, p in bookings.items()}

    def teardown(self) -> None:
        self.live.binder.close()


TestLiveCacheMachine = LiveCacheMachine.TestCase
TestLiveCacheMachine.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)


def test_pods_of_a_missing_podgroup_wait_for_it() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=4))
    live, framework = make(api)
    member = {"scheduling.k8s.io/group-name": "g"}
    for i in range(2):
        api.add_pod(pod_object(f"g{i}", {GPU: 1}, annotations=member))
    schedule(live, framework, 1)
    assert not any(p["spec"].get("nodeName") for p in api.pods.values())  # not scheduled as gangs of one
    assert api.events[-1][2] == "PodGroup default/g does not exist (yet); its pods wait for it"
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 3},
    }
    live.cache.on_podgroup("ADDED", group)
    schedule(live, framework, 1)
    assert not any(p["spec"].get("nodeName") for p in api.pods.values())  # 2 of minMember 3
    api.add_pod(pod_object("g2", {GPU: 1}, annotations=member))
    schedule(live, framework, 1)
    assert all(p["spec"].get("nodeName") == "n1" for p in api.pods.values())


def test_an_unschedulable_gang_tells_every_member_and_its_podgroup_the_shortfall() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=2))
    live, framework = make(api)
    live.queue.retry_seconds = 3600
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 3},
    }
    live.cache.on_podgroup("ADDED", group)
    for i in range(3):
        api.add_pod(pod_object(f"g{i}", {GPU: 1}, annotations={"scheduling.k8s.io/group-name": "g"}))
    schedule(live, framework, 1)
    shortfall = "gang: 2/3 tasks placed; 1 needs 1 whole GPU, largest free block 0"
    assert sorted((name, message) for name, reason, message in api.events if reason == "FailedScheduling") == [
        (f"g{i}", shortfall) for i in range(3)
    ]
    (condition,) = api.groups["default/g"]["conditions"]
    assert condition["type"] == "Unschedulable"
    assert condition["message"] == f"3/3 tasks in gang unschedulable: {shortfall}"


def queue_object(name: str, state: str = "", **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }
    if state:
        obj["status"] = {"state": state}
    return obj


def test_pods_without_a_queue_run_once_other_queues_exist() -> None:
    """Volcano's example/deployment/queue.yaml (a queue `test`, weight 1, not reclaimable, 2 CPUs)
    made every pod without a queue fail with "queue 'default' does not exist"."""
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, framework = make(api)
    live.cache.on_queue("ADDED", queue_object("test", reclaimable=False, capability={"cpu": "2"}))
    api.add_pod(pod_object("plain", {CORE: 20}))
    api.add_pod(pod_object("in-test", {CORE: 20}, annotations={"scheduling.volcano.sh/queue-name": "test"}))
    schedule(live, framework, 1)
    assert api.pods["default/plain"]["spec"]["nodeName"] == "n1"
    assert api.pods["default/in-test"]["spec"]["nodeName"] == "n1"


def test_a_closed_queue_admits_no_new_pods() -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, framework = make(api)
    live.cache.on_queue("ADDED", queue_object("shut", state="Closed"))
    api.add_pod(pod_object("late", {CORE: 20}, annotations={"scheduling.volcano.sh/queue-name": "shut"}))
    schedule(live, framework, 1)
    assert "nodeName" not in api.pods["default/late"]["spec"]
    assert api.events[-1][1:] == ("FailedScheduling", "allocate: queue shut is Closed")


def test_queue_status_counts_pod_groups_and_what_the_queue_holds() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=1))
    live, framework = make(api)
    live.cache.on_queue("ADDED", queue_object("default"))
    live.cache.on_queue("ADDED", queue_object("shut", state="Closed"))
    api.add_pod(pod_object("a", {CORE: 30}, cpu="2"))
    api.add_pod(pod_object("b", {GPU: 2}))  # never fits a 1-GPU node
    schedule(live, framework, 1)
    assert live.sync_queues() == 2
    default = api.queue_status["default"]
    assert (default["state"], default["running"], default["inqueue"], default["pending"]) == ("Open", 1, 1, 0)
    assert default["allocated"] == {"cpu": "2000m", "memory": "1024Mi", CORE: "30"}
    assert api.queue_status["shut"]["state"] == "Closed"
    assert live.sync_queues() == 0  # nothing changed: nothing written


def test_a_cache_takes_the_pods_of_every_name_it_answers_to() -> None:
    api = FakeApi()
    live = live_cache(P, (P.scheduler_name, "default-scheduler"), api, bind_workers=2, retry_seconds=0.0)
    try:
        for name, scheduler in (("ours", P.scheduler_name), ("plain", "default-scheduler"), ("theirs", "volcano")):
            live.cache.on_pod("ADDED", pod_object(name, {CORE: 30}, scheduler=scheduler))
        assert sorted(e.task.name for e in live.queue.pending.values()) == ["ours", "plain"]
    finally:
        live.binder.close()


def test_namespace_labels_reach_the_snapshot_for_namespace_selectors() -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live, _ = make(api)
    live.cache.on_namespace("ADDED", {"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    assert live.snapshot().pods.namespaces == {"team-a": {"team": "a"}}
    live.cache.on_namespace("MODIFIED", {"metadata": {"name": "team-a", "labels": {"team": "b"}}})
    assert live.snapshot().pods.namespaces == {"team-a": {"team": "b"}}
    live.cache.on_namespace("DELETED", {"metadata": {"name": "team-a"}})
    assert live.snapshot().pods.namespaces == {}
    live.binder.close()


def test_placed_pods_keep_their_labels_and_terms_in_the_snapshot() -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    held = pod_object("held", {}, cpu="1")
    held["metadata"]["labels"] = {"app": "db"}
    held["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    api.add_pod(held)
    live, framework = make(api)
    schedule(live, framework)
    pods = live.snapshot().pods
    ((facts, node),) = pods.pods.values()
    assert node == "n1"
    assert facts.labels == {"app": "db"}
    assert pods.with_anti_affinity == 1
    live.binder.close()


def test_a_pods_binding_event_reuses_its_task_and_nothing_else_does() -> None:
    """The event of a pod's binding (nodeName, the scheduler's annotations, a status) gives the task
    of the pod's earlier event back as a fresh copy, equal to what reading the pod anew gives; any
    other change (a label, another annotation, the spec) is read anew."""
    pending = pod_object("p", {P.resources.core: "30"}, annotations={P.annotations.policy: "fgd"})
    earlier = task_from_pod(pending, P)
    earlier.status = TaskStatus.BOUND
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = "n1"
    bound["metadata"]["annotations"].update(
        {P.annotations.assignment: "{}", P.annotations.assignment_signature: "s", P.annotations.assume_time: "1"}
    )
    bound["metadata"]["resourceVersion"] = "9"
    bound["status"] = {"phase": "Running"}
    reused = task_from_pod(bound, P, earlier)
    assert reused is not earlier
    assert reused.request is earlier.request
    assert reused.pod is bound
    assert vars(reused) == vars(task_from_pod(bound, P))
    for change in (
        lambda p: p["metadata"].setdefault("labels", {}).update({"app": "x"}),
        lambda p: p["metadata"]["annotations"].update({P.annotations.policy: "binpack"}),
        lambda p: p["spec"].update({"priority": 5}),
    ):
        other = copy.deepcopy(bound)
        change(other)
        fresh = task_from_pod(other, P, earlier)
        assert vars(fresh) == vars(task_from_pod(other, P))
    assert (
        task_from_pod(copy.deepcopy(bound) | {"metadata": bound["metadata"] | {"annotations": {}}}, P, earlier).policy
        == ""
    )


def test_binder_threads_start_as_nodes_wait_and_end_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most bind_workers binder threads, started as binds wait; one idle for BINDER_IDLE_S ends,
    and later binds start new ones."""
    monkeypatch.setattr(binder, "BINDER_IDLE_S", 0.2)
    api = FakeApi()
    for i in range(4):
        api.add_node(node_object(f"n{i}"))
    live, framework = make(api)  # bind_workers=2
    for i in range(8):
        api.add_pod(pod_object(f"p{i}", {CORE: 30, MEM: 4}))
    schedule(live, framework)
    assert sum(1 for p in api.pods.values() if p["spec"].get("nodeName")) == 8
    assert 1 <= len(live.binder._threads) <= 2
    deadline = time.monotonic() + 10
    while live.binder._threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live.binder._threads == []
    api.add_pod(pod_object("later", {CORE: 30, MEM: 4}))
    schedule(live, framework)
    assert api.pods["default/later"]["spec"].get("nodeName")
    live.binder.close()
    assert live.binder._threads == []
