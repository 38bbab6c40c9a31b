"""Node scores kept per pod signature and updated on change (issue 36): the session's summed node
scores of a pod, per row, at the row version (`NodeTable.version`, a hash of the row's content) they
were worked out for.

When every node-order plugin declares a pod's scores row-local (`RowLocalScores.row_local_key`), the
pods of one signature (the tuple of the plugins' keys) share one entry: a later pod rescores only the
rows whose version changed since (the one or two a placement touched), then reads the rest. The
summing is the session's, row by row (each plugin's scores are elementwise numpy arithmetic, so a row
scored alone has the same bits as in a call over every row), and the answer is a fresh array.
Callers: `Session.node_order`. Kept from session to session (`rowmemos.py`) while the nodes' metadata
and capacities (what versions do not cover) stay as they were; within a session they do not change,
and its statements change rows only through the table (which bumps versions).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from runtimekit.model import NodeTable
from runtimekit.scheduler.framework.values import Rows, Scores

MAX_SIGNATURES = 256  # entries kept before the memo starts afresh (a session sees few distinct pods)
UNSCORED = -1  # the version of a row not scored yet (versions are never negative)


class _Entry:
    __slots__ = ("scores", "version")

    def __init__(self, size: int) -> None:
        self.version = np.full(size, UNSCORED, np.int64)
        self.scores = np.zeros(size, np.float64)

    def grow(self, size: int) -> None:
        if self.version.size < size:
            extra = size - self.version.size
            self.version = np.concatenate([self.version, np.full(extra, UNSCORED, np.int64)])
            self.scores = np.concatenate([self.scores, np.zeros(extra, np.float64)])


class ScoreMemo:
    """See the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, ...], _Entry] = {}

    def scores(
        self, signature: tuple[Hashable, ...], table: NodeTable, rows: Rows, compute: Callable[[Rows], Scores]
    ) -> Scores:
        """The scores of `rows` for a pod of `signature`: those of rows unchanged since the last pod
        of it as kept, the others from `compute` (the session's sum over the plugins, for the rows it
        is given)."""
        entry = self._entries.get(signature)
        if entry is None:
            if len(self._entries) >= MAX_SIGNATURES:
                self._entries.clear()
            entry = self._entries[signature] = _Entry(table.rows)
        n = table.rows
        entry.grow(n)
        changed = entry.version[:n] != table.version[:n]
        if table.all_active(rows):  # every row: compare views, no gathers
            stale: Rows = changed.nonzero()[0]
        else:
            stale = rows[changed[rows]]
        if stale.size:
            # every row stale (the first pod of a signature): the plugins get `rows` itself, whose
            # identity lets them read views
            fresh = compute(rows if stale.size == rows.size else stale)
            entry.scores[stale] = fresh
            entry.version[stale] = table.version[stale]
        if table.all_active(rows):
            return entry.scores[:n].copy()
        found: Scores = entry.scores[rows]
        return found
