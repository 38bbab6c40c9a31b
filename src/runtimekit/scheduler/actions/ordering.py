"""A priority queue ordered by a session comparison (job, queue or task order).

The heap holds (key, seq, value) entries: `seq` keeps equal items first in, first out. The key is
the comparison wrapped by `functools.cmp_to_key`, or, when no plugin orders the kind (the session's
fallback alone decides), an equivalent plain sort key the session hands out, which spares calling
the comparison through every plugin list on each sift: same order, a fraction of the cost."""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class OrderedQueue(Generic[T]):
    """Pops the item that `compare` puts first (ties: first pushed); items pushed back are re-ordered.
    `key`, when given, must order exactly as `compare` does."""

    def __init__(
        self, compare: Callable[[T, T], int], items: Iterable[T] = (), key: Callable[[T], Any] | None = None
    ) -> None:
        self._key = key or functools.cmp_to_key(compare)
        self._seq = itertools.count()
        self._heap: list[tuple[Any, int, T]] = [(self._key(v), next(self._seq), v) for v in items]
        heapq.heapify(self._heap)

    def push(self, value: T) -> None:
        heapq.heappush(self._heap, (self._key(value), next(self._seq), value))

    def pop(self) -> T:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
