"""Taints and tolerations with the semantics of `v1.Toleration.ToleratesTaint` and kube-scheduler's
TaintToleration and NodeUnschedulable plugins.

A toleration tolerates a taint when its effect is empty or equal, its key is empty or equal, and
its operator is `Exists`, or `Equal` (or empty) with an equal value. Any other operator tolerates
nothing. The filter rejects a node with an untolerated `NoSchedule` or `NoExecute` taint; the score
counts untolerated `PreferNoSchedule` taints, reading only the tolerations whose effect is empty or
`PreferNoSchedule`, and is normalised in reverse (fewest is best).

Pure; callers: the predicates and nodeorder plugins, topology spread's node inclusion.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE = "NoSchedule", "NoExecute", "PreferNoSchedule"
UNSCHEDULABLE_KEY = "node.kubernetes.io/unschedulable"
# kube-scheduler hides a taint's key and value from pod statuses (1.35, and patch releases of 1.32-1.34)
REASON = "node(s) had untolerated taint(s)"
UNSCHEDULABLE_REASON = "node(s) were unschedulable"


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
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerated(tolerations: Iterable[TolerationLike], taint: TaintLike) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def untolerated(taints: Iterable[TaintLike], tolerations: Sequence[TolerationLike]) -> TaintLike | None:
    """The first `NoSchedule`/`NoExecute` taint no toleration covers, or None."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(tolerations, taint):
            return taint
    return None


def tolerates_unschedulable(tolerations: Iterable[TolerationLike]) -> bool:
    """Whether the pod tolerates a cordoned node (the `node.kubernetes.io/unschedulable:NoSchedule` taint)."""
    return any(
        (not t.effect or t.effect == NO_SCHEDULE)
        and (not t.key or t.key == UNSCHEDULABLE_KEY)
        and (t.operator == "Exists" or (t.operator in ("", "Equal") and t.value == ""))
        for t in tolerations
    )


def intolerable_prefer_no_schedule(taints: Iterable[TaintLike], tolerations: Sequence[TolerationLike]) -> int:
    """How many `PreferNoSchedule` taints the pod's (empty-effect or PreferNoSchedule) tolerations leave."""
    usable = [t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE]
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerated(usable, taint))
