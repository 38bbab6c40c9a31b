"""The row memos (`ScoreMemo`, `FitMemo`) kept from session to session (issue 36).

A memo entry is worth as much as the rows it keeps: scheduling 1,000 pods a second in sessions of
50 ms, a session sees a few dozen pods of many signatures, and a memo that died with its session
would check and score every row again for the first pod of each signature in each session. Row
versions (`NodeTable.version`) cover what a row holds free, its GPUs and its node's name and GPU model,
as they do within a session; what else the row-local plugins read of a node is checked here once per
session: its metadata (labels, taints, schedulability: `Snapshot.meta_version` and the entries) and
its capacities (CPU, memory, each GPU's memory). While those are as the memos last saw them, the
memos carry over; else a session starts with empty ones.
Callers: `Framework.open_session` (one `RowMemos` per framework, so per conf) and `Session`.
"""

from __future__ import annotations

import numpy as np

from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.framework.fitmemo import FitMemo
from runtimekit.scheduler.framework.info import NodeMeta, Snapshot
from runtimekit.scheduler.framework.scorememo import ScoreMemo


class _Basis:
    """What the memos were filled against, beyond the row versions."""

    __slots__ = ("cpu_total", "gmem_total", "mem_total", "meta", "meta_version", "rows")

    def __init__(self, snapshot: Snapshot) -> None:
        table = snapshot.table
        self.rows = table.rows
        self.meta_version = snapshot.meta_version
        self.meta: list[NodeMeta | None] = list(snapshot.meta[: self.rows])
        self.cpu_total: IntArray = table.cpu_total[: self.rows].copy()
        self.mem_total: IntArray = table.mem_total[: self.rows].copy()
        self.gmem_total: IntArray = table.gmem_total[: self.rows].copy()

    def holds(self, snapshot: Snapshot) -> bool:
        table, rows = snapshot.table, self.rows
        return (
            table.rows == rows
            and snapshot.meta_version == self.meta_version
            and table.gmem_total.shape[1] == self.gmem_total.shape[1]
            and snapshot.meta[:rows] == self.meta
            and np.array_equal(table.cpu_total[:rows], self.cpu_total)
            and np.array_equal(table.mem_total[:rows], self.mem_total)
            and np.array_equal(table.gmem_total[:rows], self.gmem_total)
        )


class RowMemos:
    """See the module docstring."""

    def __init__(self) -> None:
        self._basis: _Basis | None = None
        self.scores = ScoreMemo()
        self.fits = FitMemo()

    def open(self, snapshot: Snapshot) -> RowMemos:
        """These memos for a session of `snapshot`: as they are when its nodes are as last seen,
        emptied otherwise."""
        if self._basis is None or not self._basis.holds(snapshot):
            self._basis = _Basis(snapshot)
            self.scores = ScoreMemo()
            self.fits = FitMemo()
        return self
