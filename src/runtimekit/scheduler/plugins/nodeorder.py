"""`nodeorder`: Kubernetes' node scores, weighted — least requested (spread CPU and memory use),
most requested (pack it), balanced resources (CPU and memory used alike), preferred node affinity,
and fewest untolerated PreferNoSchedule taints. Each is 0-100 before its weight.

Implements NodeOrder. Arguments are Volcano's: `leastrequested.weight` (default 1),
`mostrequested.weight` (0), `balancedresource.weight` (1), `nodeaffinity.weight` (1),
`tainttoleration.weight` (1); Volcano's other score weights (`podaffinity`, `imagelocality`,
`podtopologyspread`, `selectorspread`, `volumebinding`) are accepted and have no effect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtimekit.scheduler.cache.objects import constraints as parse_constraints
from runtimekit.scheduler.framework.arguments import ArgumentError, parse_arguments
from runtimekit.scheduler.framework.info import Requirement, TaskInfo
from runtimekit.scheduler.framework.interfaces import NodeOrder, Plugin, Rows, Scores
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView

IGNORED = (
    "podaffinity.weight",
    "imagelocality.weight",
    "podtopologyspread.weight",
    "selectorspread.weight",
    "volumebinding.weight",
)


@dataclass(frozen=True)
class NodeOrderArgs:
    leastrequested: float = 1.0
    mostrequested: float = 0.0
    balancedresource: float = 1.0
    nodeaffinity: float = 1.0
    tainttoleration: float = 1.0
    ignored: float = 0.0

    def __post_init__(self) -> None:
        for name in ("leastrequested", "mostrequested", "balancedresource", "nodeaffinity", "tainttoleration"):
            if getattr(self, name) < 0:
                raise ArgumentError(f"nodeorder: {name}.weight must not be negative")


def _fractions(ssn: SessionView, task: TaskInfo, rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    table = ssn.table
    cpu_cap = np.maximum(table.cpu_total[rows], 1)
    mem_cap = np.maximum(table.mem_total[rows], 1)
    cpu = (cpu_cap - table.cpu_free[rows] + task.request.cpu_milli) / cpu_cap
    mem = (mem_cap - table.mem_free[rows] + task.request.memory_mib) / mem_cap
    return np.clip(cpu, 0, 1), np.clip(mem, 0, 1)


def _preferred(pod: Mapping[str, Any] | None) -> list[tuple[int, tuple[Requirement, ...]]]:
    if not pod:
        return []
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    out = []
    for item in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        term = parse_constraints(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [item.get("preference") or {}]
                        }
                    }
                }
            }
        ).affinity_terms
        if term:
            out.append((int(item.get("weight", 1)), term[0]))
    return out


class NodeOrderPlugin(Plugin, NodeOrder):
    name = "nodeorder"

    def __init__(self, args: NodeOrderArgs) -> None:
        self.args = args

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        a = self.args
        score = np.zeros(rows.size)
        if a.leastrequested or a.mostrequested or a.balancedresource:
            cpu, mem = _fractions(ssn, task, rows)
            if a.leastrequested:
                score += a.leastrequested * np.floor((1 - (cpu + mem) / 2) * 100)
            if a.mostrequested:
                score += a.mostrequested * np.floor((cpu + mem) / 2 * 100)
            if a.balancedresource:
                score += a.balancedresource * np.floor((1 - np.abs(cpu - mem) / 2) * 100)
        metas = ssn.snapshot.meta
        preferred = _preferred(task.pod) if a.nodeaffinity else []
        if preferred:
            raw = np.array(
                [
                    sum(w for w, reqs in preferred if all(r.matches(metas[row].labels) for r in reqs))
                    if metas[row] is not None
                    else 0
                    for row in rows.tolist()
                ],
                np.float64,
            )
            if raw.max() > 0:
                score += a.nodeaffinity * np.floor(raw * 100 / raw.max())
        if a.tainttoleration:
            counts = (
                np.array(
                    [
                        sum(
                            1
                            for t in metas[row].taints
                            if t.effect == "PreferNoSchedule"
                            and not any(tol.tolerates(t) for tol in task.constraints.tolerations)
                        )
                        if metas[row] is not None
                        else 0
                        for row in rows.tolist()
                    ],
                    np.float64,
                )
                if any(m is not None and m.taints for m in metas)
                else np.zeros(rows.size)
            )
            if counts.max() > 0:
                score += a.tainttoleration * np.floor((1 - counts / counts.max()) * 100)
        return score


def build(arguments: Mapping[str, Any], context: BuildContext) -> NodeOrderPlugin:
    mapped = {k: v for k, v in arguments.items() if k not in IGNORED}
    aliases = {
        f"{n}.weight": n
        for n in ("leastrequested", "mostrequested", "balancedresource", "nodeaffinity", "tainttoleration")
    }
    return NodeOrderPlugin(parse_arguments(NodeOrderArgs, "nodeorder", mapped, aliases))
