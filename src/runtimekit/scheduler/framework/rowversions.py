"""Values kept per pod signature and per node row, each at the row version (`NodeTable.version`, a hash
of the row's content) it was worked out at: the part `ScoreMemo` (scores) and `FitMemo` (whether the
row passed) share (issue 36). An entry grows with the table; the rows whose version moved since are
`stale` and are worked out again by the memo's caller.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from runtimekit.model import NodeTable
from runtimekit.scheduler.framework.values import Rows

MAX_SIGNATURES = 256  # entries kept before a memo starts afresh (a session sees few distinct pods)
UNSEEN = -1  # the version of a row not worked out yet (versions are never negative)

T = TypeVar("T", bound=np.generic)


class RowValues(Generic[T]):
    """One signature's value per row, with the row version each was worked out at."""

    __slots__ = ("values", "version")

    def __init__(self, size: int, dtype: type[T]) -> None:
        self.version = np.full(size, UNSEEN, np.int64)
        self.values: npt.NDArray[T] = np.zeros(size, dtype)

    def grow(self, size: int) -> None:
        if self.version.size < size:
            extra = size - self.version.size
            self.version = np.concatenate([self.version, np.full(extra, UNSEEN, np.int64)])
            self.values = np.concatenate([self.values, np.zeros(extra, self.values.dtype)])

    def stale(self, table: NodeTable, rows: Rows, every: bool) -> Rows:
        """Those of `rows` (all the table's active rows when `every`) whose version moved since."""
        n = table.rows
        changed = self.version[:n] != table.version[:n]
        found: Rows = changed.nonzero()[0] if every else rows[changed[rows]]
        return found

    def seen(self, rows: Rows, table: NodeTable) -> None:
        """`rows` are worked out again at their current versions."""
        self.version[rows] = table.version[rows]


class PerSignature(Generic[T]):
    """A `RowValues` per pod signature, at most `MAX_SIGNATURES` of them (then all are dropped)."""

    def __init__(self, dtype: type[T]) -> None:
        self._dtype = dtype
        self._entries: dict[tuple[Hashable, ...], RowValues[T]] = {}

    def entry(self, signature: tuple[Hashable, ...], table: NodeTable) -> RowValues[T]:
        """The signature's entry, grown to the table's rows."""
        entry = self._entries.get(signature)
        if entry is None:
            if len(self._entries) >= MAX_SIGNATURES:
                self._entries.clear()
            entry = self._entries[signature] = RowValues(table.rows, self._dtype)
        entry.grow(table.rows)
        return entry
