"""The scheduling queue on its own, with an injected clock: where a pending pod stands (active, backing
off, unschedulable, binding) after each event, and the back-offs it waits (an error's 1 s doubling
to 10 s, a failed bind's 1 s doubling to 60 s, as the live cache computed them inline before)."""

from __future__ import annotations

import threading

import pytest

from runtimekit.model import PodKey
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.scheduling_queue import BIND_BACKOFF, ERROR_BACKOFF, QueueState, SchedulingQueue
from scheduler.fake_api import P, pod_object

ACTIVE, BACKOFF, UNSCHEDULABLE, BINDING = (
    QueueState.ACTIVE,
    QueueState.BACKOFF,
    QueueState.UNSCHEDULABLE,
    QueueState.BINDING,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def queue_with(name: str = "p", retry_seconds: float = 30.0) -> tuple[SchedulingQueue, Clock, PodKey]:
    clock = Clock()
    queue = SchedulingQueue(threading.RLock(), clock, retry_seconds)
    task = task_from_pod(pod_object(name, {}), P)
    assert queue.add(task)
    return queue, clock, task.key


def test_a_new_pod_is_active_and_wakes_the_loop() -> None:
    queue, _, key = queue_with()
    assert queue.work.is_set()
    assert queue.state(key) is ACTIVE
    assert queue.has_work()
    again = task_from_pod(pod_object("p", {}), P)
    again.key = key
    queue.work.clear()
    assert not queue.add(again)  # a known pod keeps where it stands, with the new task
    entry = queue.get(key)
    assert entry is not None
    assert entry.task is again
    assert not queue.work.is_set()


@pytest.mark.parametrize(
    ("event", "state"),
    [
        ("nothing", UNSCHEDULABLE),
        ("move_all", ACTIVE),
        ("activate", ACTIVE),
        ("retry_seconds pass", ACTIVE),
        ("a moment passes", UNSCHEDULABLE),
    ],
)
def test_a_misfit_waits_for_a_change_or_retry_seconds(event: str, state: QueueState) -> None:
    queue, clock, key = queue_with(retry_seconds=30.0)
    queue.failed(key, clock(), error=False)
    if event == "move_all":
        queue.move_all()
    elif event == "activate":
        queue.activate(key)
    elif event == "retry_seconds pass":
        clock.now += 30.0
    elif event == "a moment passes":
        clock.now += 29.99
    assert queue.state(key) is state
    assert queue.has_work() is (state is ACTIVE)


def test_an_error_backs_off_one_second_doubling_to_ten_whatever_changes() -> None:
    queue, clock, key = queue_with(retry_seconds=3600.0)
    for wait in (1.0, 2.0, 4.0, 8.0, 10.0, 10.0):
        queue.failed(key, clock(), error=True)
        queue.move_all()  # a change does not shorten a back-off
        clock.now += wait - 0.01
        assert queue.state(key) is BACKOFF
        clock.now += 0.01
        assert queue.state(key) is ACTIVE
    queue.failed(key, clock(), error=False)  # a misfit ends the run of errors
    queue.failed(key, clock(), error=True)
    entry = queue.get(key)
    assert entry is not None
    assert entry.not_before == clock() + 1.0


@pytest.mark.parametrize("attempts", range(1, 10))
def test_a_failed_bind_backs_off_as_the_live_cache_did(attempts: int) -> None:
    queue, clock, key = queue_with()
    for _ in range(attempts):
        queue.assumed(key)
        assert queue.state(key) is BINDING
        assert not queue.has_work()
        queue.back_off(key)
    entry = queue.get(key)
    assert entry is not None
    assert entry.attempts == attempts
    assert entry.not_before - clock() == min(60.0, 0.5 * 2 ** min(attempts, 7))  # the inline formula it replaced
    assert queue.state(key) is BACKOFF
    clock.now = entry.not_before
    assert queue.state(key) is ACTIVE


def test_the_back_offs_are_the_ones_the_code_used() -> None:
    assert [ERROR_BACKOFF.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert [BIND_BACKOFF.delay(n) for n in range(1, 9)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


def test_a_pod_backing_off_and_unschedulable_is_active_when_neither_holds() -> None:
    """A gang's member tried with its siblings while it backed off, and found no node."""
    queue, clock, key = queue_with()
    queue.assumed(key)
    queue.back_off(key)  # 1 s
    queue.failed(key, clock(), error=False)
    assert queue.state(key) is BACKOFF
    clock.now += 1.0
    assert queue.state(key) is UNSCHEDULABLE
    queue.move_all()
    assert queue.state(key) is ACTIVE


def test_a_removed_pod_is_in_no_state_and_events_about_it_are_harmless() -> None:
    queue, clock, key = queue_with()
    assert queue.remove(key) is not None
    assert queue.remove(key) is None
    assert queue.state(key) is None
    assert queue.failed(key, clock(), error=True) is None
    queue.back_off(key)
    queue.activate(key)
    assert len(queue) == 0
    assert not queue.has_work()
