"""Outcomes of plugin calls as values: a code that says what the scheduler does next, reasons,
and the name of the plugin that said it (kube-scheduler's `framework.Status`).

What each code makes the scheduler do:
- UNSCHEDULABLE: the pod waits until something that could help changes (a pod leaves, a node or
  queue changes) or the retry period passes; preemption may try the nodes that failed this way;
- UNRESOLVABLE: as UNSCHEDULABLE, but no eviction can help: preemption skips the pod (from a
  pre-predicate) or the node (a verdict's `unresolvable` rows);
- ERROR: broken infrastructure or a bug: the pod is retried after a back-off (1 s doubling to
  10 s, kube-scheduler's podInitialBackoffSeconds/podMaxBackoffSeconds), whatever changes;
- SKIP (from a pre-predicate only): the plugin has nothing to check for this pod; its predicate is
  not called for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

import numpy as np


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1  # broken infrastructure or a bug; the pod is retried later
    UNSCHEDULABLE = 2  # may fit once something changes (a pod leaves, a node is added)
    UNRESOLVABLE = 3  # will not fit however the cluster changes (UnschedulableAndUnresolvable)
    SKIP = 4  # a pre-predicate's: nothing to check for this pod (the plugin's predicate is skipped)


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        """Success or skip: nothing stands in the pod's way."""
        return self.code is Code.SUCCESS or self.code is Code.SKIP

    @property
    def message(self) -> str:
        text = "; ".join(self.reasons) or self.code.name.lower()
        return f"{self.plugin}: {text}" if self.plugin else text

    def stamped(self, plugin: str) -> Status:
        return self if self.plugin else replace(self, plugin=plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNRESOLVABLE, reasons)


def error(*reasons: str) -> Status:
    return Status(Code.ERROR, reasons)


Explain = Callable[[], list[tuple[str, Any]]]


@dataclass
class FitErrors:
    """Why a task fits on no node: a count of nodes per reason, as kube-scheduler reports it.

    Predicates may explain their failures lazily (`defer`); the counts are worked out the first
    time `reasons` is read, so a decision nobody reports costs nothing to explain."""

    nodes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    status: Status | None = None  # a node-independent failure (pre-predicate, invalid request)
    _deferred: list[tuple[str, Any, Explain, bool]] = field(default_factory=list)
    _unresolvable: list[tuple[Any, Any, Any]] = field(default_factory=list)  # (rows, passed, mask or function)

    def defer_unresolvable(self, rows: Any, passed: Any, mask: Any) -> None:
        """Of `rows`, those failing (not `passed`) where `mask` (or `mask()`, called when asked)
        holds failed for a reason no eviction can fix."""
        self._unresolvable.append((rows, passed, mask))

    def unresolvable_rows(self) -> set[int]:
        """Rows where preemption cannot help (kube-scheduler's UnschedulableAndUnresolvable nodes)."""
        out: set[int] = set()
        for rows, passed, mask in self._unresolvable:
            flags = mask() if callable(mask) else mask
            out.update(rows[flags & ~passed].tolist())
        return out

    @property
    def resolvable(self) -> bool:
        """False when the pod fails for a node-independent reason no eviction can fix."""
        return self.status is None or self.status.code is not Code.UNRESOLVABLE

    def add(self, reason: str, count: int = 1) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + count

    def defer(self, fallback: str, passed: Any, explain: Explain, exclusive: bool = True) -> None:
        """Count the rows where `passed` (a mask) is False by the reasons `explain()` gives, when
        asked; `fallback` for those no reason covers. Exclusive: a row counts under its first
        reason only (a plugin's first failure); else under each reason that covers it (kube-
        scheduler's resource fit lists every insufficient resource of a node)."""
        self._deferred.append((fallback, passed, explain, exclusive))

    @property
    def reasons(self) -> dict[str, int]:
        for fallback, passed, explain, exclusive in self._deferred:
            failed = ~passed
            left = failed.copy()
            for reason, mask in explain():
                hit = (left if exclusive else failed) & mask
                count = int(np.count_nonzero(hit))
                if count:
                    self.add(reason, count)
                left &= ~hit
            rest = int(np.count_nonzero(left))
            if rest:
                self.add(fallback, rest)
        self._deferred.clear()
        return self.counts

    @property
    def message(self) -> str:
        if self.status is not None and not self.status.ok:
            return self.status.message
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"0/{self.nodes} nodes are available" + (f": {parts}." if parts else ".")
