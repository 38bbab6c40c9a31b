"""Wait for SIGINT or SIGTERM in a daemon's main thread, so it can stop its servers cleanly."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType


@dataclass
class StopSignals:
    """The SIGINT/SIGTERM caught while `catch_stop_signals` is active; `wait` blocks for the first."""

    event: threading.Event
    received: list[int] = field(default_factory=list)

    def wait(self) -> int:
        """Block until a signal arrives (or the event is set); the signal number, 0 for the event."""
        while not self.event.wait(1.0):
            pass
        return self.received[0] if self.received else 0


@contextmanager
def catch_stop_signals(stop: threading.Event | None = None) -> Iterator[StopSignals]:
    """Handle SIGINT/SIGTERM from now on (restoring the previous handlers on exit).

    A daemon enters this before it announces that it is ready, so a signal sent right after the
    announcement is caught rather than killing the process before it can stop cleanly.
    """
    caught = StopSignals(stop or threading.Event())

    def handler(signum: int, _frame: FrameType | None) -> None:
        caught.received.append(signum)
        caught.event.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def wait_for_stop_signal(stop: threading.Event | None = None) -> int:
    """Block until SIGINT/SIGTERM arrives (or `stop` is set); returns the signal number (0 for `stop`).

    Installs handlers for the two signals and restores the previous ones before returning.
    """
    with catch_stop_signals(stop) as caught:
        return caught.wait()
