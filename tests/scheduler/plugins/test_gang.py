"""`gang`: its job order (Volcano's, and a partly placed gang before the other unready jobs), the
give-back of a gang that holds members it cannot complete, and the two together in sessions: a gang
left half bound by a scheduler restart completes before the pods that compete with it."""

from __future__ import annotations

from typing import cast

import pytest

from runtimekit.model import NodeCapacity, NodeInventory, NodeName, PodKey
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.gang import Gang, GangArgs, build
from scheduler.helpers import job_of, whole

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    arguments: {gang.partialHoldSeconds: 60}
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""


def gang(name: str, size: int, min_member: int, statuses: dict[TaskStatus, int]) -> JobInfo:
    """A gang of `size` one-GPU tasks: so many of each status in `statuses`, the rest pending."""
    job = job_of(name, *[whole(1)] * size, min_member=min_member)
    tasks = iter(job.tasks.values())
    for status, count in statuses.items():
        for _ in range(count):
            next(tasks).status = status
    return job


B, R, S, A = TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED, TaskStatus.ALLOCATED


@pytest.mark.parametrize(
    ("left", "right", "order"),
    [
        pytest.param(gang("a", 2, 2, {}), gang("b", 2, 2, {B: 2}), -1, id="not ready before ready (Volcano)"),
        pytest.param(gang("a", 2, 2, {R: 2}), gang("b", 1, 1, {B: 1}), 0, id="both ready: no opinion"),
        pytest.param(gang("a", 1, 1, {}), gang("b", 1, 1, {}), 0, id="neither holds anything: no opinion"),
        pytest.param(gang("a", 1, 1, {}), gang("b", 12, 12, {B: 6}), 1, id="a partly bound gang before an unready pod"),
        pytest.param(gang("a", 4, 4, {R: 1}), gang("b", 12, 12, {B: 6}), 0, id="both partly placed: no opinion"),
        pytest.param(gang("a", 4, 4, {A: 2}), gang("b", 4, 4, {}), -1, id="members placed in the session count"),
        pytest.param(gang("a", 4, 4, {S: 2}), gang("b", 4, 4, {}), 0, id="succeeded members hold nothing"),
        pytest.param(gang("a", 4, 4, {B: 4}), gang("b", 12, 12, {B: 6}), 1, id="a ready job after a partly placed one"),
    ],
)
def test_job_order(left: JobInfo, right: JobInfo, order: int) -> None:
    plugin = Gang()
    assert plugin.job_order(left, right) == order
    assert plugin.job_order(right, left) == -order


class _Session:
    """What `on_session_open` reads of a session: its jobs and time."""

    def __init__(self, now: float, *jobs: JobInfo) -> None:
        self.now, self.jobs = now, {j.key: j for j in jobs}


def session(now: float, *jobs: JobInfo) -> SessionView:
    return cast(SessionView, _Session(now, *jobs))


def test_a_partly_placed_gang_is_given_back_once_it_has_held_its_members_long_enough() -> None:
    plugin = Gang(GangArgs(partial_hold_seconds=60))
    stranded = gang("g", 12, 12, {B: 6})
    for now, expected in ((100.0, False), (130.0, False), (159.0, False), (160.0, True)):
        plugin.on_session_open(session(now, stranded))
        reason = plugin.job_release(stranded)
        assert bool(reason) is expected, now
    assert reason is not None
    assert "6/12 members" in reason
    assert "60s" in reason
    plugin.on_session_open(session(200.0, stranded))
    assert plugin.job_release(stranded) is None  # the clock starts again after a give-back


@pytest.mark.parametrize(
    "job",
    [
        pytest.param(gang("g", 4, 4, {}), id="holds nothing"),
        pytest.param(gang("g", 4, 4, {B: 4}), id="complete"),
        pytest.param(gang("g", 1, 1, {}), id="a pod of its own"),
        pytest.param(gang("g", 4, 4, {S: 2}), id="only succeeded members"),
    ],
)
def test_a_job_that_holds_no_partial_gang_is_never_given_back(job: JobInfo) -> None:
    plugin = Gang(GangArgs(partial_hold_seconds=1))
    for now in (0.0, 100.0):
        plugin.on_session_open(session(now, job))
        assert plugin.job_release(job) is None


def test_a_gang_that_completed_meanwhile_starts_its_clock_again() -> None:
    plugin = Gang(GangArgs(partial_hold_seconds=60))
    stranded = gang("g", 4, 4, {B: 2})
    plugin.on_session_open(session(0.0, stranded))
    assert plugin.job_release(stranded) is None
    complete = gang("g", 4, 4, {B: 4})
    plugin.on_session_open(session(50.0, complete))
    plugin.on_session_open(session(70.0, stranded))
    assert plugin.job_release(stranded) is None  # 70 s after the first failure, but 0 s into this one


def test_zero_never_gives_back_and_a_negative_hold_is_refused() -> None:
    plugin = build({"gang.partialHoldSeconds": 0}, BuildContext())
    stranded = gang("g", 4, 4, {B: 2})
    for now in (0.0, 10**6):
        plugin.on_session_open(session(now, stranded))
        assert plugin.job_release(stranded) is None
    with pytest.raises(ArgumentError, match="partialHoldSeconds"):
        build({"partialHoldSeconds": -1}, BuildContext())
    with pytest.raises(ArgumentError, match="unknown"):
        build({"gang.other": 1}, BuildContext())


# -- in sessions: the state a scheduler restart leaves ----------------------------------------------
def cluster_with_half_a_gang(competitors: int, running: int = 0) -> tuple[StaticCache, Framework]:
    """Two nodes of 8 GPUs; a gang of 12 one-GPU pods of which 6 are bound (the rest were never
    bound: the scheduler stopped mid-gang); `running` one-GPU pods bound since; and `competitors`
    one-GPU pods waiting, created before the gang."""
    entries = [
        (
            NodeInventory.simulated(name, "T4", 8, 16384),
            NodeCapacity(64000, 256 << 30, 110),
            NodeMeta(NodeName(name), {}, (), False, "T4"),
        )
        for name in ("n1", "n2")
    ]
    cache = StaticCache(entries)
    group = JobInfo(JobKey("gang"), "default", "gang", min_member=12, created=100.0)
    for i in range(12):
        group.add(TaskInfo(PodKey(f"gang-{i}"), "default", f"gang-{i}", group.key, whole(1), created=100.0))
    cache.add_job(group)
    Framework(parse_conf(CONF), builtin_registry(), BuildContext()).run_once(cache)  # the first scheduler
    assert len(cache.bound) == 12
    for i in range(6, 12):  # ... stopped before these binds went out
        key = PodKey(f"gang-{i}")
        cache.ledger.release(key)
        del cache.bound[key]
        task = cache.jobs[group.key].tasks[key]
        task.status, task.node, task.placement = TaskStatus.PENDING, None, None
    if running:
        cache.remove_job(group.key)
        cache.add_job(job_of("running", *[whole(1)] * running, min_member=running))
        Framework(parse_conf(CONF), builtin_registry(), BuildContext()).run_once(cache)
        assert sum(1 for k in cache.bound if str(k).startswith("running")) == running
        cache.add_job(group)
    for i in range(competitors):
        cache.add_job(job_of(f"c{i}", whole(1), created=float(i)))
    return cache, Framework(parse_conf(CONF), builtin_registry(), BuildContext())  # the restarted one


def test_after_a_restart_the_partly_bound_gang_completes_before_its_competitors() -> None:
    cache, restarted = cluster_with_half_a_gang(competitors=8)
    restarted.run_once(cache)
    gang_bound = sorted(str(k) for k in cache.bound if str(k).startswith("gang-"))
    assert len(gang_bound) == 12  # before the fix: 6, the competitors took 8 of the 10 free GPUs
    assert sum(1 for k in cache.bound if str(k).startswith("c")) == 4  # what is left goes to them
    assert not cache.evicted


def test_a_gang_that_cannot_complete_gives_its_gpus_back_after_its_hold() -> None:
    cache, restarted = cluster_with_half_a_gang(competitors=2, running=5)  # 5 GPUs free, the gang needs 6
    cache.now = 1000.0
    restarted.run_once(cache)
    assert "gang-6" not in cache.bound  # holds 6, cannot place 6 more ...
    assert not cache.evicted  # ... and is still within its hold
    assert cache.unschedulable[PodKey("gang-6")].message.startswith("gang: ")
    assert sum(1 for k in cache.bound if str(k).startswith("c")) == 2  # competitors use what the gang cannot
    cache.now = 1059.0
    restarted.run_once(cache)
    assert not cache.evicted
    cache.now = 1060.0
    restarted.run_once(cache)
    evicted = sorted(str(key) for key, _ in cache.evicted)
    assert evicted == sorted(f"gang-{i}" for i in range(6))
    assert all("held 6/12 members for 60s" in reason for _, reason in cache.evicted)
    assert not any(str(k).startswith("gang-") for k in cache.bound)  # their GPUs are free again
