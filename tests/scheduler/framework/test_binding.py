"""Reserve, Unreserve, PreBind and Bind as kube-scheduler defines them: Reserve once the node is
chosen, PreBind before the bind, the first Bind plugin that does not skip binds, and Unreserve
(idempotent, every Reserve plugin, in reverse order) on any failure after Reserve."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from runtimekit.model import PodKey
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import TaskInfo, TaskStatus
from runtimekit.scheduler.framework.interfaces import Bind, Binding, DeviceChoice, Plugin, PreBind, Reserve
from runtimekit.scheduler.framework.registry import Registry
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, error
from runtimekit.scheduler.framework.view import SessionView
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.helpers import job_of, share, static_cache, whole


class Recorder(Plugin, Reserve, PreBind, Bind):
    """Writes every call into a shared journal; fails or binds where told to."""

    def __init__(self, name: str, journal: list[str], fail: str = "", binds: bool = False) -> None:
        self.name, self.journal, self.fail, self.binds = name, journal, fail, binds

    def _answer(self, point: str, task: TaskInfo) -> Status:
        self.journal.append(f"{self.name}.{point} {task.name}")
        return error(f"{self.name} refuses") if self.fail == point else SUCCESS

    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        return self._answer("reserve", task)

    def unreserve(self, task: TaskInfo) -> None:
        self.journal.append(f"{self.name}.unreserve {task.name}")

    def pre_bind(self, binding: Binding) -> Status:
        binding.annotations[f"seen-by/{self.name}"] = "yes"
        return self._answer("pre_bind", binding.task)

    def bind(self, binding: Binding) -> Status:
        status = self._answer("bind", binding.task)
        return status if self.binds or not status.ok else SKIP


def framework(journal: list[str], conf_extra: str = "", **behaviour: Mapping[str, Any]) -> Framework:
    registry = builtin_registry()
    for name in ("first", "second"):
        options = dict(behaviour.get(name, {}))
        registry.register_plugin(name, lambda _a, _c, n=name, o=options: Recorder(n, journal, **o))
    conf = f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: first
  - name: second
- plugins:
  - name: predicates
  - name: gpushare
    arguments: {{gpushare.policy: bestfit}}
{conf_extra}"""
    return Framework(parse_conf(conf), registry, BuildContext())


def test_a_bound_pod_went_through_reserve_pre_bind_and_bind_in_plugin_order() -> None:
    journal: list[str] = []
    cache = static_cache("n1")
    cache.add_job(job_of("a", share(300)))
    framework(journal).run_once(cache)
    assert journal == [
        "first.reserve a-0",
        "second.reserve a-0",
        "first.pre_bind a-0",
        "second.pre_bind a-0",
        "first.bind a-0",  # both skip: the cache's own binder binds
        "second.bind a-0",
    ]
    binding = cache.bindings[PodKey("a-0")]
    assert binding.annotations == {"seen-by/first": "yes", "seen-by/second": "yes"}
    assert cache.bound[PodKey("a-0")].status is TaskStatus.BOUND


def test_the_first_bind_plugin_that_does_not_skip_binds_and_the_rest_are_not_asked() -> None:
    journal: list[str] = []
    cache = static_cache("n1")
    cache.add_job(job_of("a", share(300)))
    framework(journal, first={"binds": True}).run_once(cache)
    assert journal[-1] == "first.bind a-0"
    assert PodKey("a-0") in cache.bound


@pytest.mark.parametrize(
    ("failing", "point", "journal_tail"),
    [
        pytest.param(
            "second",
            "reserve",
            ["first.reserve a-0", "second.reserve a-0", "second.unreserve a-0", "first.unreserve a-0"],
            id="a reserve fails: every Reserve plugin unreserves, in reverse order",
        ),
        pytest.param(
            "first",
            "pre_bind",
            ["first.pre_bind a-0", "second.unreserve a-0", "first.unreserve a-0"],
            id="a pre-bind fails: no bind, unreserved",
        ),
        pytest.param(
            "second",
            "bind",
            ["first.bind a-0", "second.bind a-0", "second.unreserve a-0", "first.unreserve a-0"],
            id="the bind fails: unreserved",
        ),
    ],
)
def test_a_failure_after_reserve_unreserves_and_leaves_the_pod_pending_with_the_reason(
    failing: str, point: str, journal_tail: list[str]
) -> None:
    journal: list[str] = []
    cache = static_cache("n1", gpus=1)
    free_before = cache.ledger.table.free_gpus("n1")
    cache.add_job(job_of("a", share(300)))
    framework(journal, **{failing: {"fail": point}}).run_once(cache)
    assert journal[-len(journal_tail) :] == journal_tail
    assert PodKey("a-0") not in cache.bound
    assert f"{failing} refuses" in cache.unschedulable[PodKey("a-0")].message
    assert cache.ledger.table.free_gpus("n1") == free_before  # the booking went back


def test_a_gang_that_does_not_fit_unreserves_the_members_it_had_placed() -> None:
    journal: list[str] = []
    cache = static_cache("n1", gpus=1)
    cache.add_job(job_of("g", whole(1), whole(1), min_member=2))
    framework(journal).run_once(cache)
    assert journal == ["first.reserve g-0", "second.reserve g-0", "second.unreserve g-0", "first.unreserve g-0"]
    assert cache.bound == {}


def test_gpushare_holds_the_gpus_in_reserve_and_writes_them_in_pre_bind() -> None:
    cache = static_cache("n1", gpus=2)
    cache.add_job(job_of("a", share(300, count=2)))
    fw = framework([])
    gpushare = fw.plugin("gpushare")
    fw.run_once(cache)
    binding = cache.bindings[PodKey("a-0")]
    placement = cache.bound[PodKey("a-0")].placement
    assert placement is not None
    assert binding.devices == [("main", placement.slots)]
    assert binding.policies == ["bestfit"]
    assert isinstance(gpushare, PreBind)
    again = gpushare.pre_bind(Binding(binding.task, binding.node, binding.choice))
    assert not again.ok  # written once, so no longer held


def test_gpushare_refuses_to_pre_bind_a_pod_whose_gpus_were_unreserved() -> None:
    fw = framework([])
    gpushare = fw.plugin("gpushare")
    assert isinstance(gpushare, Reserve)
    assert isinstance(gpushare, PreBind)
    cache = static_cache("n1")
    cache.add_job(job_of("a", share(300)))
    task = next(iter(cache.jobs.values())).tasks[PodKey("a-0")]
    ssn = fw.open_session(cache)
    assert gpushare.reserve(task, DeviceChoice(), ssn).ok
    gpushare.unreserve(task)
    gpushare.unreserve(task)  # idempotent
    status = gpushare.pre_bind(Binding(task, cache.node("n1"), DeviceChoice()))
    assert not status.ok
    assert "unreserved" in status.message


def test_a_pod_left_pipelined_at_the_end_of_a_session_is_unreserved() -> None:
    journal: list[str] = []
    registry = builtin_registry()
    registry.register_plugin("first", lambda _a, _c: Recorder("first", journal))
    fw = Framework(parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: first\n'), registry, BuildContext())
    cache = static_cache("n1")
    task = job_of("p", share(300)).tasks[PodKey("p-0")]
    ssn = fw.open_session(cache)
    stmt = ssn.statement()
    stmt.pipeline(task, 0, DeviceChoice())
    fw.close_session(ssn)
    assert journal == ["first.reserve p-0", "first.unreserve p-0"]


def test_a_live_bind_the_api_server_refuses_is_unreserved() -> None:
    journal: list[str] = []
    api = FakeApi()
    api.add_node(node_object("n1"))
    live = live_cache(P, P.scheduler_name, api, bind_workers=1, retry_seconds=0.0)
    api.attach(live.cache)
    live.cache.on_node("ADDED", api.nodes["n1"])
    registry: Registry = builtin_registry()
    registry.register_plugin("first", lambda _a, _c: Recorder("first", journal))
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: first\n  - name: gpushare\n'
    fw = Framework(parse_conf(conf), registry, BuildContext(protocol=P))
    api.add_pod(pod_object("p", {P.resources.core: 30, P.resources.memory: 2}))
    api.fail_next_binds = 1
    fw.run_once(live)
    assert live.binder.drain()
    assert journal == ["first.reserve p", "first.pre_bind p", "first.bind p", "first.unreserve p"]
    assert api.pods["default/p"]["spec"].get("nodeName") is None
    live.binder.close()


class GroupRecordingCache:
    """Wraps a static cache and records the group each bind came with."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.groups: dict[str, Any] = {}

    def snapshot(self) -> Any:
        return self.inner.snapshot()

    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: Any, group: Any = None) -> None:
        self.groups[task.name] = group
        self.inner.bind(task, choice, hooks)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.inner.evict(task, reason)

    def job_updated(self, job: Any) -> None:
        self.inner.job_updated(job)


def test_a_gang_committed_together_binds_as_one_group_and_a_pod_alone_without_one() -> None:
    journal: list[str] = []
    inner = static_cache("n1", gpus=4)
    inner.add_job(job_of("g", whole(1), whole(1), min_member=2))
    inner.add_job(job_of("a", share(300)))
    cache = GroupRecordingCache(inner)
    framework(journal).run_once(cache)  # type: ignore[arg-type]
    assert cache.groups["g-0"] is not None
    assert cache.groups["g-0"] is cache.groups["g-1"]
    assert cache.groups["g-0"].size == 2
    assert cache.groups["a-0"] is None
