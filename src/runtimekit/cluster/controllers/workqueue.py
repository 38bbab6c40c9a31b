"""The work queue of a controller: keys to sync, each at most once in the queue, and timed work.

`add(key)` queues a key (a key already waiting is not queued twice); `add_after(key, seconds)`
queues it later (deadlines, retries; a key already due earlier is not scheduled again, so a
controller that asks on every sync keeps one timer per key); `get()` blocks for the next key and
returns None once the queue is closed. One worker per queue, so a key is never synced twice at the same time.
Callers: the workload controllers, the Job controller.
"""

from __future__ import annotations

import heapq
import threading
import time


class DelayQueue:
    """See the module docstring."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: dict[str, None] = {}
        self._later: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}  # key -> when its earliest timer fires
        self.closed = False

    def add(self, key: str) -> None:
        with self._cond:
            self._ready[key] = None
            self._cond.notify_all()

    def add_after(self, key: str, delay_s: float) -> None:
        due = time.monotonic() + max(0.0, delay_s)
        with self._cond:
            known = self._due.get(key)
            if known is not None and known <= due:
                return
            self._due[key] = due
            heapq.heappush(self._later, (due, key))
            self._cond.notify_all()

    def get(self) -> str | None:
        """The next key; None once closed."""
        with self._cond:
            while not self.closed:
                now = time.monotonic()
                while self._later and self._later[0][0] <= now:
                    due, key = heapq.heappop(self._later)
                    if self._due.get(key) == due:  # else an earlier timer of the key fired already
                        del self._due[key]
                        self._ready[key] = None
                if self._ready:
                    key = next(iter(self._ready))
                    del self._ready[key]
                    return key
                wait = self._later[0][0] - now if self._later else None
                self._cond.wait(wait)
            return None

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
