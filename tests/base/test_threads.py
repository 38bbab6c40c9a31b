"""Workers: threads that share one stop event; a periodic step survives its own exceptions."""

from __future__ import annotations

import threading

import pytest

from runtimekit.base.threads import Workers


def test_stop_ends_every_thread_and_is_idempotent() -> None:
    workers = Workers("test")
    started = threading.Barrier(3)

    def loop() -> None:
        started.wait(5)
        workers.wait(None)

    workers.spawn("one", loop)
    workers.spawn("two", loop)
    started.wait(5)
    assert not workers.stopped
    assert workers.stop(5.0)
    assert workers.stopped
    assert workers.stop(0.0)


def test_every_keeps_running_after_a_failing_step(caplog: pytest.LogCaptureFixture) -> None:
    workers = Workers()
    calls: list[int] = []
    third = threading.Event()

    def step() -> None:
        calls.append(1)
        if len(calls) == 3:
            third.set()
        if len(calls) == 1:
            raise ZeroDivisionError("first round")

    workers.every("ticker", 0.001, step)
    assert third.wait(10)
    workers.stop()
    assert len(calls) >= 3
    assert "ticker failed" in caplog.text


def test_a_thread_may_stop_its_own_workers() -> None:
    workers = Workers()
    result: list[bool] = []
    done = threading.Event()

    def stop_self() -> None:
        result.append(workers.stop(1.0))
        done.set()

    workers.spawn("self-stopper", stop_self)
    assert done.wait(5)
    assert result == [True]
