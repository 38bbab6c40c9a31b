"""A work queue of keys, as client-go's: a key waiting is held once however often it is added;
a key being processed is not handed out twice; failed keys come back after a per-key exponential
backoff; `add_after` schedules a key for later (e.g. a TTL). Thread-safe."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable


class WorkQueue:
    def __init__(self, base_delay: float = 0.2, max_delay: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.base_delay, self.max_delay, self.clock = base_delay, max_delay, clock
        self._cond = threading.Condition()
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()  # added while being processed: requeue when done
        self._later: list[tuple[float, str]] = []
        self._failures: dict[str, int] = {}
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            heapq.heappush(self._later, (self.clock() + delay, key))
            self._cond.notify()

    def retry(self, key: str) -> float:
        """Re-add a failed key after its backoff; returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = float(min(self.max_delay, self.base_delay * 2**failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """The key succeeded: reset its backoff."""
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> str | None:
        """The next key (marked as processing), or None on timeout or close."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                now = self.clock()
                while self._later and self._later[0][0] <= now:
                    _, key = heapq.heappop(self._later)
                    if key in self._processing:
                        self._dirty.add(key)
                    elif key not in self._queued:
                        self._queued.add(key)
                        self._queue.append(key)
                if self._closed:
                    return None
                if self._queue:
                    key = self._queue.pop(0)
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                waits = [t - now for t, _ in self._later[:1]]
                if deadline is not None:
                    waits.append(deadline - now)
                    if deadline <= now:
                        return None
                self._cond.wait(min(waits) if waits else None)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._queue.append(key)
                    self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)
