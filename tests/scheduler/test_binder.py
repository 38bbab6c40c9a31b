"""The binder on its own, over a cluster cache and a queue fed by hand: a bind runs PreBind, writes and
signs the assignment, then posts through the API; any failure unreserves, gives the booking back and
backs the pod off; evictions and status writes never raise."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from runtimekit.model import NodeName, Placement, PodKey, Slot
from runtimekit.model.authority import signing_message
from runtimekit.scheduler.binder import BinderPool
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.queues import queue_status
from runtimekit.scheduler.framework.binding import BindGroup, Binding
from runtimekit.scheduler.framework.info import Resources, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, error
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.scheduling_queue import QueueState, SchedulingQueue
from scheduler.fake_api import FakeApi, P, node_object, pod_object


@dataclass
class Hooks:
    """BindHooks that answer as told and record what the binder asked."""

    pre_bind_status: Status = SUCCESS
    bind_status: Status = SKIP
    devices: list[tuple[str, tuple[Slot, ...]]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def pre_bind(self, binding: Binding) -> Status:
        self.calls.append("pre_bind")
        binding.assign(self.devices, "test")
        return self.pre_bind_status

    def bind(self, binding: Binding) -> Status:
        self.calls.append("bind")
        return self.bind_status

    def unreserve(self, task: TaskInfo) -> None:
        self.calls.append("unreserve")


class Signer:
    def sign(self, message: bytes) -> str:
        return f"signed:{len(message)}"


def parts(api: FakeApi, signer: Signer | None = None) -> tuple[SchedulingQueue, ClusterCache, BinderPool]:
    queue = SchedulingQueue(threading.RLock())
    cache = ClusterCache(P, P.scheduler_name, queue)
    api.attach(cache)
    api.add_node(node_object("n1", gpus=1))
    cache.on_node("ADDED", api.nodes["n1"])
    return queue, cache, BinderPool(api, cache, queue, workers=2, signer=signer)


def assumed(api: FakeApi, cache: ClusterCache, name: str = "p") -> TaskInfo:
    api.add_pod(pod_object(name, {P.resources.core: 30}))
    (entry,) = [e for e in cache.queue if e.task.name == name]
    task = entry.task.clone()
    task.node, task.placement = NodeName("n1"), Placement(NodeName("n1"), 1000, 1024)
    bound = cache.assume(task)
    assert bound is not None
    return bound


def test_a_bind_runs_pre_bind_then_posts_and_the_pod_leaves_the_queue() -> None:
    api = FakeApi()
    queue, cache, binder = parts(api)
    task = assumed(api, cache)
    hooks = Hooks()
    binder.submit(task, DeviceChoice(), hooks)
    assert binder.drain()
    assert hooks.calls == ["pre_bind", "bind"]
    assert api.pods["default/p"]["spec"]["nodeName"] == "n1"
    assert P.annotations.assume_time in api.pods["default/p"]["metadata"]["annotations"]
    assert queue.state(task.key) is None
    assert cache.running[task.key].status in (TaskStatus.BOUND, TaskStatus.RUNNING)
    assert api.events[-1][1] == "Scheduled"
    assert binder.bound_count == 1
    binder.close()


def test_the_assignment_is_written_from_the_nodes_gpus_and_signed() -> None:
    api = FakeApi()
    _queue, cache, binder = parts(api, Signer())
    task = assumed(api, cache)
    hooks = Hooks(devices=[("main", (Slot(0, 300, 4096),))])
    binder.submit(task, DeviceChoice(), hooks)
    assert binder.drain()
    notes = api.pods["default/p"]["metadata"]["annotations"]
    text = notes[P.annotations.assignment]
    assert '"main"' in text
    assert notes[P.annotations.assignment_signature] == Signer().sign(signing_message(task.uid, text))
    binder.close()


@pytest.mark.parametrize(
    "failure",
    ["pre_bind fails", "a Bind plugin fails", "the API refuses"],
)
def test_a_failed_bind_unreserves_gives_the_booking_back_and_backs_off(failure: str) -> None:
    api = FakeApi()
    queue, cache, binder = parts(api)
    task = assumed(api, cache)
    hooks = Hooks()
    if failure == "pre_bind fails":
        hooks.pre_bind_status = error("no")
    elif failure == "a Bind plugin fails":
        hooks.bind_status = error("no")
    else:
        api.fail_next_binds = 1
    generation = queue.generation
    binder.submit(task, DeviceChoice(), hooks)
    assert binder.drain()
    assert hooks.calls[-1] == "unreserve"
    assert cache.ledger.bookings() == {}
    assert not cache.assumed
    assert cache.pods.frozen().pods == {}
    assert queue.state(task.key) is QueueState.BACKOFF
    assert queue.generation == generation + 1  # the booking given back may help an unschedulable pod
    assert "binding rejected" in api.events[-1][2]
    assert binder.bind_failures == 1
    binder.close()


def test_bind_now_binds_on_the_callers_thread_and_says_why_it_failed() -> None:
    api = FakeApi()
    queue, cache, binder = parts(api)
    task = assumed(api, cache)
    assert binder.bind_now(task, DeviceChoice(), Hooks()) is None
    assert api.pods["default/p"]["spec"]["nodeName"] == "n1"
    assert not binder._threads  # no binder thread was needed
    other = assumed(api, cache, "q")
    api.fail_next_binds = 1
    hooks = Hooks()
    assert binder.bind_now(other, DeviceChoice(), hooks) == "injected failure"
    assert hooks.calls[-1] == "unreserve"
    assert other.key not in cache.ledger.bookings()
    assert queue.state(other.key) is QueueState.BACKOFF
    binder.close()


class Refusing(FakeApi):
    def evict(self, task: TaskInfo, reason: str) -> None:
        raise RuntimeError("refused")

    def update_group(self, namespace: str, name: str, status: Mapping[str, object]) -> None:
        raise RuntimeError("refused")

    def update_queue(self, name: str, status: Mapping[str, object]) -> None:
        raise RuntimeError("refused")


def test_evictions_and_status_writes_that_fail_are_logged_not_raised() -> None:
    api = Refusing()
    _, cache, binder = parts(api)
    api.add_pod(pod_object("p", {}))
    (entry,) = cache.queue
    binder.evict(entry.task, "preempt")
    binder.update_group("default", "g", {"phase": "Running"})
    assert binder.sync_queues({"q": queue_status("", [], Resources(), P)}) == 1  # tried, not recorded
    binder.close()


def test_queue_statuses_are_written_when_they_change() -> None:
    api = FakeApi()
    _, _, binder = parts(api)
    open_ = queue_status("", ["Running"], Resources(), P)
    assert binder.sync_queues({"q": open_}) == 1
    assert binder.sync_queues({"q": open_}) == 0
    assert binder.sync_queues({"q": queue_status("Closed", ["Running"], Resources(), P)}) == 1
    assert api.queue_status["q"]["state"] == "Closed"
    binder.close()


# -- a gang committed together binds as a group ------------------------------------------------------
class SelectiveHooks(Hooks):
    """Hooks whose PreBind fails for the pods named in `failing`."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__()
        self.failing = failing

    def pre_bind(self, binding: Binding) -> Status:
        self.calls.append(f"pre_bind {binding.task.name}")
        return error("volumes cannot be bound") if binding.task.name in self.failing else SUCCESS

    def unreserve(self, task: TaskInfo) -> None:
        self.calls.append(f"unreserve {task.name}")


def test_a_group_binds_only_once_every_member_pre_bound() -> None:
    api = FakeApi()
    _queue, cache, binder = parts(api)
    a, b = assumed(api, cache, "a"), assumed(api, cache, "b")
    hooks = SelectiveHooks(set())
    group = BindGroup(2)
    binder.submit(a, DeviceChoice(), hooks, group)
    assert binder.drain(0.2) is False  # a waits for b, held (no thread blocks)
    assert "nodeName" not in api.pods["default/a"]["spec"]
    binder.submit(b, DeviceChoice(), hooks, group)
    assert binder.drain()
    assert api.pods["default/a"]["spec"]["nodeName"] == "n1"
    assert api.pods["default/b"]["spec"]["nodeName"] == "n1"
    assert binder.bound_count == 2
    binder.close()


@pytest.mark.parametrize("failing", ["a", "b"])
def test_one_members_failed_pre_bind_gives_the_whole_group_back(failing: str) -> None:
    api = FakeApi()
    queue, cache, binder = parts(api)
    a, b = assumed(api, cache, "a"), assumed(api, cache, "b")
    hooks = SelectiveHooks({failing})
    group = BindGroup(2)
    binder.submit(a, DeviceChoice(), hooks, group)
    binder.submit(b, DeviceChoice(), hooks, group)
    assert binder.drain()
    assert "nodeName" not in api.pods["default/a"]["spec"]
    assert "nodeName" not in api.pods["default/b"]["spec"]
    assert {"unreserve a", "unreserve b"} <= set(hooks.calls)
    assert cache.ledger.bookings() == {}
    assert queue.state(a.key) is QueueState.BACKOFF
    assert queue.state(b.key) is QueueState.BACKOFF
    assert binder.bind_failures == 2
    binder.close()


def test_a_member_that_could_not_be_assumed_fails_its_group() -> None:
    api = FakeApi()
    queue, cache, binder = parts(api)
    a = assumed(api, cache, "a")
    api.add_pod(pod_object("b", {P.resources.core: 30}))
    (entry,) = [e for e in cache.queue if e.task.name == "b"]
    hooks = SelectiveHooks(set())
    group = BindGroup(2)
    binder.submit(a, DeviceChoice(), hooks, group)
    binder.abandon(entry.task, group)
    assert binder.drain()
    assert "nodeName" not in api.pods["default/a"]["spec"]
    assert "unreserve a" in hooks.calls
    assert queue.state(a.key) is QueueState.BACKOFF
    binder.close()


class Overtaken(BindGroup):
    """A group whose member `slow` pauses (up to 1 s) right after its PreBind was counted, until the
    other members' binds are through: what two binder threads on two nodes can do."""

    def __init__(self, size: int, slow: TaskInfo, api: FakeApi) -> None:
        super().__init__(size)
        self.slow, self.api = slow, api
        self.counted = threading.Event()  # `slow` was counted: the others' PreBind may end

    def done(self, key: PodKey, ok: bool) -> tuple[list[PodKey], list[PodKey]]:
        answer = super().done(key, ok)
        if key == self.slow.key:
            self.counted.set()
            deadline, mine = time.monotonic() + 1.0, f"default/{self.slow.name}"
            while time.monotonic() < deadline and not any(
                pod["spec"].get("nodeName") for name, pod in self.api.pods.items() if name != mine
            ):
                time.sleep(0.01)
        return answer


class AfterCounted(SelectiveHooks):
    """SelectiveHooks whose PreBind of any pod but the group's `slow` one ends once that one was counted."""

    def __init__(self, failing: set[str], group: Overtaken) -> None:
        super().__init__(failing)
        self.group = group

    def pre_bind(self, binding: Binding) -> Status:
        if binding.task.key != self.group.slow.key:
            assert self.group.counted.wait(5)
        return super().pre_bind(binding)


@pytest.mark.parametrize("failing", [set(), {"b"}])
def test_a_member_overtaken_by_the_last_one_is_neither_lost_nor_held(failing: set[str]) -> None:
    """Member a's PreBind is counted, then b's (the last: the group binds, or b fails and the group
    fails) settles on another binder thread before a is held. a must still bind with the group (or
    fail with it), never stay held: a held member keeps its booking and its gang short for ever."""
    api = FakeApi()
    queue, cache, binder = parts(api)
    api.add_node(node_object("n2", gpus=1))
    cache.on_node("ADDED", api.nodes["n2"])
    tasks = []
    for name, node in (("a", "n1"), ("b", "n2")):
        api.add_pod(pod_object(name, {P.resources.core: 30}))
        (entry,) = [e for e in cache.queue if e.task.name == name]
        task = entry.task.clone()
        task.node, task.placement = NodeName(node), Placement(NodeName(node), 1000, 1024)
        bound = cache.assume(task)
        assert bound is not None
        tasks.append(bound)
    group = Overtaken(2, tasks[0], api)
    hooks = AfterCounted(failing, group)
    for task in tasks:
        binder.submit(task, DeviceChoice(), hooks, group)
    assert binder.drain(10)
    placed = {name: api.pods[f"default/{name}"]["spec"].get("nodeName") for name in ("a", "b")}
    if failing:
        assert placed == {"a": None, "b": None}
        assert cache.ledger.bookings() == {}
        assert queue.state(tasks[0].key) is QueueState.BACKOFF
    else:
        assert placed == {"a": "n1", "b": "n2"}
    binder.close()


def test_bind_group_tally() -> None:
    group = BindGroup(3)
    assert group.done(PodKey("a"), True) == ([], [])
    assert group.done(PodKey("b"), False) == ([], [PodKey("b"), PodKey("a")])
    assert group.done(PodKey("c"), True) == ([], [PodKey("c")])
    assert group.failed
    whole = BindGroup(2)
    assert whole.done(PodKey("a"), True) == ([], [])
    assert whole.done(PodKey("b"), True) == ([PodKey("a"), PodKey("b")], [])
