"""A priority queue ordered by a session comparison (job, queue or task order)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Item(Generic[T]):
    __slots__ = ("compare", "seq", "value")

    def __init__(self, value: T, compare: Callable[[T, T], int], seq: int) -> None:
        self.value, self.compare, self.seq = value, compare, seq

    def __lt__(self, other: _Item[T]) -> bool:
        result = self.compare(self.value, other.value)
        return result < 0 if result else self.seq < other.seq


class OrderedQueue(Generic[T]):
    """Pops the item that `compare` puts first; items pushed back are re-ordered."""

    def __init__(self, compare: Callable[[T, T], int], items: Iterable[T] = ()) -> None:
        self._compare = compare
        self._seq = itertools.count()
        self._heap = [_Item(v, compare, next(self._seq)) for v in items]
        heapq.heapify(self._heap)

    def push(self, value: T) -> None:
        heapq.heappush(self._heap, _Item(value, self._compare, next(self._seq)))

    def pop(self) -> T:
        return heapq.heappop(self._heap).value

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
