"""Taints and tolerations with the semantics of `v1.Toleration.ToleratesTaint` and component-helpers'
`FindMatchingUntoleratedTaint`.

A toleration tolerates a taint when its effect is empty or equal, its key is empty or equal, and
its operator is `Exists`, or `Equal` (or empty) with an equal value. Any other operator tolerates
nothing. A pod may not be placed on a node with a `NoSchedule` or `NoExecute` taint that none of its
tolerations tolerates.

Taints and tolerations are read through their attributes (`TaintLike`, `TolerationLike`), so frozen
values of any component fit. Pure; callers: the scheduler's TaintToleration, NodeUnschedulable and
topology spread (`scheduler.kubesem`) and its framework's node constraints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE = "NoSchedule", "NoExecute", "PreferNoSchedule"
EQUAL, EXISTS = "Equal", "Exists"
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"  # the taint of a cordoned node (NoSchedule)


class TaintLike(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def effect(self) -> str: ...


class TolerationLike(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def effect(self) -> str: ...


def tolerates(toleration: TolerationLike, taint: TaintLike) -> bool:
    """`ToleratesTaint`."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", EQUAL):
        return toleration.value == taint.value
    return toleration.operator == EXISTS


def tolerated(tolerations: Iterable[TolerationLike], taint: TaintLike) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def untolerated(taints: Iterable[TaintLike], tolerations: Sequence[TolerationLike]) -> TaintLike | None:
    """The first `NoSchedule`/`NoExecute` taint no toleration covers, or None."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(tolerations, taint):
            return taint
    return None
