"""Named daemon threads that share one stop event: the start/stop pattern of every long-running part.

`Workers` is what client-go's `wait.Until(f, period, stopCh)` and a stop channel are to Go code:
- `spawn(name, target)` runs `target()` on a daemon thread; the target polls `stopping` (or waits
  on it with `wait(seconds)`) and returns when it is set;
- `every(name, period_s, step)` runs `step()` every `period_s` seconds until stopped; an exception
  in one step is logged and the next step runs (a loop must outlive one bad round);
- `stop(timeout)` sets the event and joins every thread (not the calling one) within
  `timeout` seconds in all; it is idempotent and returns whether all of them ended.
Threads are daemons, so a part that is never stopped does not keep the process alive.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Workers:
    def __init__(self, name: str = "") -> None:
        self.name = name
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def spawn(self, name: str, target: Callable[[], object]) -> threading.Thread:
        """Start `target` on a new daemon thread named `name`."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return thread

    def every(self, name: str, period_s: float, step: Callable[[], object]) -> threading.Thread:
        """Run `step` every `period_s` seconds (the first after one period) until stopped."""

        def loop() -> None:
            while not self.stopping.wait(period_s):
                try:
                    step()
                except Exception:  # the next round retries
                    log.exception("%s failed", name)

        return self.spawn(name, loop)

    @property
    def stopped(self) -> bool:
        return self.stopping.is_set()

    def wait(self, seconds: float | None) -> bool:
        """Sleep up to `seconds`, waking at once on stop; True when stopping."""
        return self.stopping.wait(seconds)

    def alive(self) -> bool:
        """Whether any of the threads still runs."""
        with self._lock:
            return any(t.is_alive() for t in self._threads)

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Tell every thread to stop and join them (except the caller's), waiting at most `timeout`
        seconds in all (None: until they end); True when all ended."""
        self.stopping.set()
        with self._lock:
            threads = list(self._threads)
        deadline = None if timeout is None else time.monotonic() + timeout
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads if t is not current)
