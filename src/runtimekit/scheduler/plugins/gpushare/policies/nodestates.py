"""Node states shared by the fragmentation policies (fgd, packfrag): a node's GPU model and the
sorted free milli of its usable GPUs, interned as small integer ids per ledger row; the distinct
states a pod can leave a node in; and the per-shape cache of each row's value at its ledger version.
Callers: policies/fgd.py, policies/packfrag.py.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, NodeTable
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.base import PodShape

NodeState = tuple[str, tuple[int, ...]]  # (GPU model, free milli of the usable GPUs, ascending)


def placements(shape: PodShape, ms: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """(free milli of the GPU used, free milli after, ascending) for each distinct way to place the
    pod on GPUs with free milli `ms`: any k fully free GPUs for whole GPUs, the k least free fitting
    GPUs for a multi-GPU share (best fit), each distinct fitting GPU for a single share."""
    if not shape.gpu:
        return [(-1, ms)]
    if shape.whole or shape.milli >= MILLI:
        rest = list(ms)
        for _ in range(shape.count):
            rest.remove(MILLI)
        return [(MILLI, tuple(sorted([*rest, *([0] * shape.count)])))]
    if shape.count > 1:
        fit = [v for v in ms if v >= shape.milli][: shape.count]
        rest = list(ms)
        for v in fit:
            rest.remove(v)
        return [(fit[0], tuple(sorted(rest + [v - shape.milli for v in fit])))]
    out = []
    previous = -1
    for i in range(bisect_left(ms, shape.milli), len(ms)):
        v = ms[i]
        if v == previous:
            continue
        previous = v
        others = ms[:i] + ms[i + 1 :]
        left = v - shape.milli
        at = bisect_left(others, left)
        out.append((v, (*others[:at], left, *others[at:])))
    return out


def best_gpu(by_value: dict[int, int], table: NodeTable, row: int, fitting: IntArray) -> list[int]:
    """The fitting GPU of a row whose free milli scores best in `by_value` (a policy's score of each
    placement by the free value of the GPU used); the lowest column on ties."""
    scored = [by_value.get(v, -1) for v in table.core_free[row, fitting].tolist()]
    return [int(fitting[scored.index(max(scored))])]


class NodeStates:
    """Each row's node state, interned as a small integer id; refreshed when the row's version changes."""

    def __init__(self) -> None:
        self.version = np.full(0, -1, np.int64)
        self.id = np.zeros(0, np.int64)
        self._ids: dict[NodeState, int] = {}
        self.states: list[NodeState] = []

    def intern(self, state: NodeState) -> int:
        found = self._ids.get(state)
        if found is None:
            found = self._ids[state] = len(self.states)
            self.states.append(state)
        return found

    def refresh(self, table: NodeTable, rows: IntArray) -> None:
        capacity = table.core_free.shape[0]
        if self.version.size < capacity:
            self.version = np.concatenate([self.version, np.full(capacity - self.version.size, -1, np.int64)])
            self.id = np.concatenate([self.id, np.zeros(capacity - self.id.size, np.int64)])
        if rows.size == 1:  # a chosen node: plain integers cost less than three array operations
            row = int(rows[0])
            if self.version[row] == table.version[row]:
                return
            stale = rows
        else:
            n = table.rows
            stale = rows[(self.version[:n] != table.version[:n])[rows]]
            if stale.size == 0:
                return
        for row in stale.tolist():
            usable = table.usable[row].tolist()
            free = sorted(c for c, u in zip(table.core_free[row].tolist(), usable, strict=True) if u)
            self.id[row] = self.intern((table.model_at(row), tuple(free)))
        self.version[stale] = table.version[stale]


@dataclass
class ShapeCache:
    """Per pod shape: each row's value (a score or a loss) at the ledger-row version it was worked out
    for, and values by node-state key (the same state is worth the same on every node)."""

    dtype: type = np.float64
    version: IntArray = field(default_factory=lambda: np.full(0, -1, np.int64))
    value: npt.NDArray[Any] = field(default_factory=lambda: np.zeros(0))
    by_key: dict[int, float] = field(default_factory=dict)

    def stale(self, table: NodeTable, rows: IntArray) -> IntArray:
        """The rows whose value is missing or older than their ledger row."""
        capacity = table.core_free.shape[0]
        if self.version.size < capacity:
            grow = capacity - self.version.size
            self.version = np.concatenate([self.version, np.full(grow, -1, np.int64)])
            self.value = np.concatenate([self.value.astype(self.dtype), np.zeros(grow, self.dtype)])
        if table.all_active(rows):  # every row: compare views instead of gathering copies
            n = rows.size
            every: IntArray = np.flatnonzero(self.version[:n] != table.version[:n])
            return every
        n = table.rows  # compare every row through views, then pick `rows`: cheaper than two gathers
        changed = self.version[:n] != table.version[:n]
        stale: IntArray = rows[changed[rows]]
        return stale

    def values(self, table: NodeTable, rows: IntArray) -> npt.NDArray[Any]:
        """The cached value of each row (a copy)."""
        if table.all_active(rows):
            return self.value[: rows.size].copy()
        found: npt.NDArray[Any] = self.value[rows]
        return found

    def store(self, table: NodeTable, rows: IntArray, values: npt.ArrayLike) -> None:
        self.value[rows] = values
        self.version[rows] = table.version[rows]
