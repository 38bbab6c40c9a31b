"""Wait for SIGINT or SIGTERM in a daemon's main thread, so it can stop its servers cleanly."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def wait_for_stop_signal(stop: threading.Event | None = None) -> int:
    """Block until SIGINT/SIGTERM arrives (or `stop` is set); returns the signal number (0 for `stop`).

    Installs handlers for the two signals and restores the previous ones before returning.
    """
    event = stop or threading.Event()
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        event.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not event.wait(1.0):
            pass
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    return received[0] if received else 0
