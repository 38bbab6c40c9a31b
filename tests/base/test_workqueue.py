"""The work queue's contracts (client-go's): one entry per key, no key handed out twice at once,
delays, per-key back-off that `forget` resets, and close. Time is a fake clock; `get(timeout=0)`
never waits."""

from __future__ import annotations

import threading

from runtimekit.base.backoff import Backoff
from runtimekit.base.workqueue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_waits_once_however_often_it_is_added() -> None:
    queue = WorkQueue(clock=Clock())
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert [queue.get(timeout=0), queue.get(timeout=0), queue.get(timeout=0)] == ["a", "b", None]


def test_a_key_being_processed_comes_back_only_when_done() -> None:
    queue = WorkQueue(clock=Clock())
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.add("a")
    assert queue.get(timeout=0) is None
    queue.done("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_add_after_waits_for_the_delay_and_keeps_order_of_due_times() -> None:
    clock = Clock()
    queue = WorkQueue(clock=clock)
    queue.add_after("late", 2.0)
    queue.add_after("soon", 1.0)
    queue.add_after("now", 0.0)
    assert queue.get(timeout=0) == "now"
    assert queue.get(timeout=0) is None
    clock.now = 1.0
    assert queue.get(timeout=0) == "soon"
    clock.now = 5.0
    assert queue.get(timeout=0) == "late"


def test_retries_back_off_per_key_until_forgotten() -> None:
    clock = Clock()
    queue = WorkQueue(Backoff(initial=1.0, maximum=4.0), clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    assert [queue.retry("a") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert queue.retry("b") == 1.0  # another key has its own count
    assert queue.retries("a") == 4
    queue.done("a")
    assert queue.get(timeout=0) is None
    clock.now = 1.0
    assert {queue.get(timeout=0), queue.get(timeout=0)} == {"a", "b"}
    queue.forget("a")
    assert queue.retries("a") == 0
    assert queue.retry("a") == 1.0


def test_close_wakes_a_waiting_worker_and_hands_out_nothing() -> None:
    queue = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    queue.close()
    worker.join(5)
    assert got == [None]
    queue.add("a")
    assert queue.get(timeout=0) is None
    assert queue.closed
