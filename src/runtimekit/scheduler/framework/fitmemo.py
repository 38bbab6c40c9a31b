"""Feasible rows kept per pod signature and checked again on change (issue 36): whether each row passed
the resource fit and every predicate for a pod, at the row version (`NodeTable.version`, a hash of
the row's content) it was checked at.

When every predicate plugin declares a pod's verdicts row-local (`RowLocalPredicate.predicate_key`),
the pods of one signature (the request's CPU, memory and scalars, the plugins the pod skips, and the
plugins' keys) share one entry: a later pod checks only the rows whose version changed since (the one
or two a placement touched), through the session's own resource fit and predicates, then reads the
rest. Each check is elementwise per row, so a row checked alone passes exactly as in a call over every
row, and the rows returned are those the full path returns, ascending (`rows` itself when all pass,
as the full path keeps it then).
Callers: `Session.select`, which takes the full path whenever no row passes, so the reasons a pod
fits nowhere are worked out as before. Kept from session to session with `ScoreMemo` (`rowmemos.py`)
while the nodes' metadata and capacities (what versions do not cover) stay as they were; within a
session they do not change, and its statements change rows only through the table (which bumps
versions).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from runtimekit.model import NodeTable
from runtimekit.scheduler.framework.rowversions import PerSignature
from runtimekit.scheduler.framework.values import Rows


class FitMemo:
    """See the module docstring."""

    def __init__(self) -> None:
        self._entries = PerSignature(np.bool_)

    def rows(
        self, signature: tuple[Hashable, ...], table: NodeTable, rows: Rows, check: Callable[[Rows], Rows]
    ) -> Rows:
        """The rows of `rows` (the candidates, ascending) that a pod of `signature` fits: those
        unchanged since the last pod of it as kept, the others from `check` (the session's resource
        fit and predicates over the rows it is given, answering those that pass)."""
        entry = self._entries.entry(signature, table)
        every = table.all_active(rows)
        stale = entry.stale(table, rows, every)
        if stale.size:
            # every row stale (the first pod of a signature): the checks get `rows` itself, whose
            # identity lets them read views
            passing = check(rows if stale.size == rows.size else stale)
            entry.values[stale] = False
            entry.values[passing] = True
            entry.seen(stale, table)
        passed = entry.values[: table.rows] if every else entry.values[rows]
        if np.count_nonzero(passed) == passed.size:
            return rows
        if every:
            kept: Rows = passed.nonzero()[0]
            return kept
        found: Rows = rows[passed]
        return found
