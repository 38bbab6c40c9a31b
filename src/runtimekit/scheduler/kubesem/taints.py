"""kube-scheduler's TaintToleration and NodeUnschedulable plugins over Kubernetes' toleration rule
(`runtimekit.kube.semantics.tolerations`).

The filter rejects a node with an untolerated `NoSchedule` or `NoExecute` taint (`untolerated`); a
cordoned node only a pod that tolerates its `node.kubernetes.io/unschedulable:NoSchedule` taint; the
score counts untolerated `PreferNoSchedule` taints, reading only the tolerations whose effect is empty
or `PreferNoSchedule`, and is normalised in reverse (fewest is best).

Pure; callers: the predicates and nodeorder plugins, the framework's node constraints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from runtimekit.kube.semantics.tolerations import (
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    UNSCHEDULABLE_KEY,
    TaintLike,
    TolerationLike,
    tolerated,
)

# kube-scheduler hides a taint's key and value from pod statuses (1.35, and patch releases of 1.32-1.34)
REASON = "node(s) had untolerated taint(s)"
UNSCHEDULABLE_REASON = "node(s) were unschedulable"


@dataclass(frozen=True)
class _Taint:
    key: str
    value: str
    effect: str


_UNSCHEDULABLE = _Taint(UNSCHEDULABLE_KEY, "", NO_SCHEDULE)


def tolerates_unschedulable(tolerations: Iterable[TolerationLike]) -> bool:
    """Whether the pod tolerates a cordoned node (the `node.kubernetes.io/unschedulable:NoSchedule` taint)."""
    return tolerated(tolerations, _UNSCHEDULABLE)


def intolerable_prefer_no_schedule(taints: Iterable[TaintLike], tolerations: Sequence[TolerationLike]) -> int:
    """How many `PreferNoSchedule` taints the pod's (empty-effect or PreferNoSchedule) tolerations leave."""
    usable = [t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE]
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerated(usable, taint))
