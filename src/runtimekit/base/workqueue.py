"""A work queue of keys, as client-go's `util/workqueue` (a rate-limiting, delaying queue).

Contracts, all thread-safe:
- a key waiting is held once, however often it is added;
- a key being processed (handed out by `get`, not yet `done`) is not handed out again; added
  meanwhile, it comes back once `done` is called;
- `add_after(key, delay)` adds it when the delay has passed (a TTL, a deadline, a leader's
  standby); a delay of zero or less adds it at once;
- `retry(key)` adds it after its own exponential back-off (`Backoff`), which grows with every
  retry of that key until `forget(key)` says it succeeded;
- after `close()`, `get` answers None and nothing more is handed out.
Callers: the node controller, the embedded cluster's Job controller.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from runtimekit.base.backoff import Backoff


class WorkQueue:
    def __init__(
        self,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = backoff or Backoff(initial=0.2, maximum=60.0)
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()  # added while being processed: back in the queue when done
        self._later: list[tuple[float, int, str]] = []  # (due, sequence, key): a heap
        self._sequence = itertools.count()
        self._failures: dict[str, int] = {}
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            self._add(key)

    def _add(self, key: str) -> None:
        """Holds the lock."""
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            if delay <= 0:
                self._add(key)
                return
            heapq.heappush(self._later, (self.clock() + delay, next(self._sequence), key))
            self._cond.notify()

    def retry(self, key: str) -> float:
        """Add a failed key again after its back-off; returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = self.backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def retries(self, key: str) -> int:
        """How often the key was retried since it last succeeded."""
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        """The key succeeded (or will not be retried): its back-off starts over."""
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, marked as processing; None on timeout or once closed."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                now = self.clock()
                while self._later and self._later[0][0] <= now:
                    self._add(heapq.heappop(self._later)[2])
                if self._closed:
                    return None
                if self._queue:
                    key = self._queue.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                waits = [due - now for due, _, _ in self._later[:1]]
                if deadline is not None:
                    if deadline <= now:
                        return None
                    waits.append(deadline - now)
                self._cond.wait(min(waits) if waits else None)

    def done(self, key: str) -> None:
        """Processing of `key` ended; if it was added meanwhile, it is queued again."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self._add(key)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        """Keys waiting now (not those scheduled for later, nor those being processed)."""
        with self._cond:
            return len(self._queue)
