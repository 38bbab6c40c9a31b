"""`predicates`: Kubernetes' node filters — node selector, required node affinity, taints and
tolerations, cordoned (unschedulable) and not-ready nodes. CPU, memory and pod-count fit is
checked by the session for every task.

Implements Predicate. Results are cached per distinct pod constraint until a node's labels, taints
or schedulability change, so thousands of pods alike cost one pass over the nodes.
Volcano's predicate arguments (`predicate.GPUSharingEnable`, `predicate.CacheEnable`, ...) are
accepted and have no effect: GPU fit belongs to the gpushare plugin here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from runtimekit.scheduler.framework.info import Constraints, NodeMeta, Taint, TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin, Predicate, Rows, Verdict
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
VOLCANO_KEYS = (
    "predicate.GPUSharingEnable",
    "predicate.GPUNumberEnable",
    "predicate.CacheEnable",
    "predicate.ProportionalEnable",
    "predicate.resources",
    "predicate.VGPUEnable",
    "predicate.NodeAffinityEnable",
    "predicate.NodePortsEnable",
    "predicate.TaintTolerationEnable",
    "predicate.PodAffinityEnable",
    "predicate.NodeVolumeLimitsEnable",
    "predicate.VolumeZoneEnable",
    "predicate.PodTopologySpreadEnable",
)


class Predicates(Plugin, Predicate):
    name = "predicates"

    def __init__(self) -> None:
        self._cache: dict[tuple[Constraints, int, int], tuple[np.ndarray, list[str | None]]] = {}

    def _node_verdicts(self, constraints: Constraints, ssn: SessionView) -> tuple[np.ndarray, list[str | None]]:
        key = (constraints, ssn.snapshot.meta_version, ssn.table.rows)
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) > 256:
                self._cache.clear()
            reasons: list[str | None] = []
            for node in ssn.snapshot.meta[: ssn.table.rows]:
                reasons.append(self._why(constraints, node))
            found = (np.array([r is None for r in reasons], np.bool_), reasons)
            self._cache[key] = found
        return found

    @staticmethod
    def _why(constraints: Constraints, node: NodeMeta | None) -> str | None:
        if node is None:
            return "node(s) were removed"
        if not node.ready:
            return "node(s) were not ready"
        if node.unschedulable and not any(t.tolerates(UNSCHEDULABLE_TAINT) for t in constraints.tolerations):
            return "node(s) were unschedulable"
        return constraints.fits(node)

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        passed_all, reasons = self._node_verdicts(task.constraints, ssn)
        passed = passed_all[rows]

        def explain() -> list[tuple[str, np.ndarray]]:
            out: dict[str, np.ndarray] = {}
            for i, row in enumerate(rows.tolist()):
                why = reasons[row]
                if why is not None:
                    out.setdefault(why, np.zeros(rows.size, np.bool_))[i] = True
            return list(out.items())

        # a selector, an affinity, a taint or a cordon: no eviction makes the node fit
        return Verdict(passed, explain, unresolvable=lambda: ~passed)


def build(arguments: Mapping[str, Any], context: BuildContext) -> Predicates:
    no_arguments("predicates", arguments, VOLCANO_KEYS)
    return Predicates()
