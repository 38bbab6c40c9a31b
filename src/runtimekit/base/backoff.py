"""Exponential back-off, as client-go's `wait.Backoff` and its `ItemExponentialFailureRateLimiter`.

The n-th delay (n from 0) is `initial * factor**n`, capped at `maximum`, then spread by up to
`jitter` either way (0.2: anywhere in 80-120 %), so that many clients that failed together do not
retry together. `delay(n)` is the pure rule; `next()` and `reset()` keep the count for a loop that
retries one thing. Callers: the informer's watch loop, the work queue's retries, the device
plugin's runtime watch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial: float = 0.2
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.0
    rand: Callable[[float, float], float] = field(default=random.uniform, repr=False)
    attempts: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial or self.factor < 1 or not 0 <= self.jitter < 1:
            raise ValueError(f"bad back-off: {self!r}")

    def delay(self, attempt: int) -> float:
        """The delay before retry number `attempt` (0: the first retry)."""
        # min() before the power would overflow: the cap is reached long before attempt 1000
        base = self.maximum if attempt >= 1000 else min(self.maximum, self.initial * self.factor**attempt)
        if not self.jitter:
            return float(base)
        return float(base * self.rand(1.0 - self.jitter, 1.0 + self.jitter))

    def next(self) -> float:
        """The delay before the next retry; counts it."""
        delay = self.delay(self.attempts)
        self.attempts += 1
        return delay

    def reset(self) -> None:
        """It worked: the next failure starts from `initial` again."""
        self.attempts = 0
