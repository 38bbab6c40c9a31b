"""Preemption and reclaim over several sessions: victims are evicted in one session, the waiting
task binds in a later one once their resources are back."""

from __future__ import annotations

from runtimekit.model import PodKey
from runtimekit.scheduler.framework.info import QueueInfo
from scheduler.helpers import share, whole
from scheduler.test_scenarios import Job, Node, Scenario, run

PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""

RECLAIM = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""


def test_a_high_priority_pod_preempts_lower_priority_ones() -> None:
    scenario = Scenario(
        "preempt",
        [Node("n1", gpus=2)],
        [
            Job("low-a", [share(600)], priority=1),
            Job("low-b", [share(600)], priority=1),
            Job("mid", [share(300)], priority=5),
        ],
        {},
        conf=PREEMPT,
    )
    cache = run(scenario)
    assert sorted(cache.bound) == ["low-a-0", "low-b-0", "mid-0"]
    from runtimekit.model import PodRequest
    from runtimekit.scheduler.builtin import builtin_registry
    from runtimekit.scheduler.framework import Framework, parse_conf
    from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo

    high = JobInfo(JobKey("high"), "default", "high", priority=10, created=9.0)
    request: PodRequest = whole(1)
    high.add(TaskInfo(PodKey("high-0"), "default", "high-0", high.key, request, priority=10, created=9.0))
    cache.add_job(high)
    framework = Framework(parse_conf(PREEMPT), builtin_registry())
    framework.run_once(cache)  # allocate fails; preempt evicts one low-priority share
    assert [key for key, _ in cache.evicted] in (["low-a-0"], ["low-b-0"])
    assert "mid-0" in cache.bound  # the mid-priority pod on the other GPU is left alone
    framework.run_once(cache)
    assert str(cache.bound[PodKey("high-0")].node) == "n1"


def test_a_queue_below_its_share_reclaims_from_one_above() -> None:
    scenario = Scenario(
        "reclaim",
        [Node("n1"), Node("n2")],
        [Job("a1", [whole(1)], queue="a"), Job("a2", [whole(1)], queue="a")],
        {},
        queues=[QueueInfo("a"), QueueInfo("b")],
        conf=RECLAIM,
    )
    cache = run(scenario)
    assert sorted(cache.bound) == ["a1-0", "a2-0"]
    from runtimekit.scheduler.builtin import builtin_registry
    from runtimekit.scheduler.framework import Framework, parse_conf
    from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo

    b = JobInfo(JobKey("b1"), "default", "b1", queue="b", created=5.0)
    b.add(TaskInfo(PodKey("b1-0"), "default", "b1-0", b.key, whole(1), created=5.0))
    cache.add_job(b)
    framework = Framework(parse_conf(RECLAIM), builtin_registry())
    framework.run_once(cache)
    assert len(cache.evicted) == 1
    assert cache.evicted[0][1] == "reclaim"
    framework.run_once(cache)
    assert PodKey("b1-0") in cache.bound


def test_gang_members_are_not_preempted_below_min_member() -> None:
    scenario = Scenario(
        "gang-victims",
        [Node("n1", gpus=2)],
        [Job("gang", [whole(1), whole(1)], min_member=2, priority=1)],
        {},
        conf=PREEMPT,
    )
    cache = run(scenario)
    assert sorted(cache.bound) == ["gang-0", "gang-1"]
    from runtimekit.scheduler.builtin import builtin_registry
    from runtimekit.scheduler.framework import Framework, parse_conf
    from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo

    high = JobInfo(JobKey("high"), "default", "high", priority=10, created=9.0)
    high.add(TaskInfo(PodKey("high-0"), "default", "high-0", high.key, whole(1), priority=10, created=9.0))
    cache.add_job(high)
    Framework(parse_conf(PREEMPT), builtin_registry()).run_once(cache)
    assert cache.evicted == []  # evicting either member would break the gang
    assert PodKey("high-0") not in cache.bound


def test_a_pod_that_fails_for_an_unresolvable_reason_preempts_nobody() -> None:
    """kube-scheduler's rule: UnschedulableAndUnresolvable is not worth a preemption. A pod naming a
    placement policy that does not exist can never be placed, so no victim may be evicted for it."""
    from runtimekit.scheduler.builtin import builtin_registry
    from runtimekit.scheduler.framework import Framework, parse_conf
    from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo

    scenario = Scenario("full", [Node("n1", gpus=2)], [Job("low", [whole(1), whole(1)], priority=1)], {}, conf=PREEMPT)
    cache = run(scenario)
    assert sorted(cache.bound) == ["low-0", "low-1"]
    high = JobInfo(JobKey("high"), "default", "high", priority=10, created=9.0)
    task = TaskInfo(PodKey("high-0"), "default", "high-0", high.key, whole(1), priority=10, created=9.0)
    task.policy = "no-such-policy"
    high.add(task)
    cache.add_job(high)
    framework = Framework(parse_conf(PREEMPT), builtin_registry())
    framework.run_once(cache)
    assert cache.evicted == []
    assert "unknown placement policy" in cache.unschedulable[PodKey("high-0")].message
