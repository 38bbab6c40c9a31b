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
from runtimekit.scheduler.framework.rowversions import PerSignature
from runtimekit.scheduler.framework.values import Rows, Scores


class ScoreMemo:
    """See the module docstring."""

    def __init__(self) -> None:
        self._entries = PerSignature(np.float64)

    def scores(
        self, signature: tuple[Hashable, ...], table: NodeTable, rows: Rows, compute: Callable[[Rows], Scores]
    ) -> Scores:
        """The scores of `rows` for a pod of `signature`: those of rows unchanged since the last pod
        of it as kept, the others from `compute` (the session's sum over the plugins, for the rows it
        is given)."""
        entry = self._entries.entry(signature, table)
        every = table.all_active(rows)  # every row: compare views, no gathers
        stale = entry.stale(table, rows, every)
        if stale.size:
            # every row stale (the first pod of a signature): the plugins get `rows` itself, whose
            # identity lets them read views
            entry.values[stale] = compute(rows if stale.size == rows.size else stale)
            entry.seen(stale, table)
        if every:
            return entry.values[: table.rows].copy()
        found: Scores = entry.values[rows]
        return found
