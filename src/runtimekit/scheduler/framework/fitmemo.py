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
from runtimekit.scheduler.framework.values import Mask, Rows

MAX_SIGNATURES = 256  # entries kept before the memo starts afresh (a session sees few distinct pods)
UNCHECKED = -1  # the version of a row not checked yet (versions are never negative)


class _Entry:
    __slots__ = ("passed", "version")

    def __init__(self, size: int) -> None:
        self.version = np.full(size, UNCHECKED, np.int64)
        self.passed: Mask = np.zeros(size, np.bool_)

    def grow(self, size: int) -> None:
        if self.version.size < size:
            extra = size - self.version.size
            self.version = np.concatenate([self.version, np.full(extra, UNCHECKED, np.int64)])
            self.passed = np.concatenate([self.passed, np.zeros(extra, np.bool_)])


class FitMemo:
    """See the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, ...], _Entry] = {}

    def rows(
        self, signature: tuple[Hashable, ...], table: NodeTable, rows: Rows, check: Callable[[Rows], Rows]
    ) -> Rows:
        """The rows of `rows` (the candidates, ascending) that a pod of `signature` fits: those
        unchanged since the last pod of it as kept, the others from `check` (the session's resource
        fit and predicates over the rows it is given, answering those that pass)."""
        entry = self._entries.get(signature)
        if entry is None:
            if len(self._entries) >= MAX_SIGNATURES:
                self._entries.clear()
            entry = self._entries[signature] = _Entry(table.rows)
        n = table.rows
        entry.grow(n)
        every = table.all_active(rows)
        changed = entry.version[:n] != table.version[:n]
        stale: Rows = changed.nonzero()[0] if every else rows[changed[rows]]
        if stale.size:
            # every row stale (the first pod of a signature): the checks get `rows` itself, whose
            # identity lets them read views
            passing = check(rows if stale.size == rows.size else stale)
            entry.passed[stale] = False
            entry.passed[passing] = True
            entry.version[stale] = table.version[stale]
        passed = entry.passed[:n] if every else entry.passed[rows]
        if np.count_nonzero(passed) == passed.size:
            return rows
        if every:
            kept: Rows = passed.nonzero()[0]
            return kept
        found: Rows = rows[passed]
        return found
