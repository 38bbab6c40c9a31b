"""A client-side request rate limit, as client-go's (`--kube-api-qps` / `--kube-api-burst`): a token
bucket of `qps` tokens a second holding at most `burst`; a request waits for its token rather than
being dropped. Callers: `KubeHttp` (every request with an answer), when a component sets a limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RequestLimiter:
    """`wait()` returns when the caller may send; `qps <= 0` means no limit."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self._clock, self._sleep = clock, sleep
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds spent waiting, all callers together

    def reserve(self) -> float:
        """Take a token (possibly one not yet earned); how long the caller must wait before sending."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            self.waited += delay
            self._sleep(delay)
