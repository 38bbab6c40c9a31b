"""`binpack` (Volcano's): prefer nodes that are fuller after placement, so whole nodes stay free.
score = weight x 100 x sum_r(w_r x used_r/capacity_r) / sum_r(w_r) over the resources the pod
asks for (CPU, memory, and GPUs when `binpack.resources` names a GPU resource of the protocol).

Implements NodeOrder. Arguments: `binpack.weight` (default 1), `binpack.cpu` (1),
`binpack.memory` (1), `binpack.resources` (comma list of extra resource names) and
`binpack.resources.<name>` (their weights, default 1). A negative weight is refused (Volcano
silently turns it into 1)."""

from __future__ import annotations

import math

import numpy as np

from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import NodeOrder, Plugin, Rows, Scores
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView


def _weight(arguments: Arguments, key: str, default: float) -> float:
    raw = arguments.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ArgumentError(f"binpack: argument {key!r} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ArgumentError(f"binpack: argument {key!r} must be a finite number, got {raw!r}")
    if value < 0:
        raise ArgumentError(f"binpack: argument {key!r} must not be negative, got {value}")
    return value


class Binpack(Plugin, NodeOrder):
    name = "binpack"

    def __init__(self, weight: float, cpu: float, memory: float, gpu: float) -> None:
        self.weight, self.cpu, self.memory, self.gpu = weight, cpu, memory, gpu

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        if not self.weight:
            return np.zeros(rows.size)
        table, req = ssn.table, task.request
        total = np.zeros(rows.size)
        weights = 0.0
        if req.cpu_milli and self.cpu:
            cap = np.maximum(table.cpu_total[rows], 1)
            total += self.cpu * (cap - table.cpu_free[rows] + req.cpu_milli) / cap
            weights += self.cpu
        if req.memory_bytes and self.memory:
            cap = np.maximum(table.mem_total[rows], 1)
            total += self.memory * (cap - table.mem_free[rows] + req.memory_bytes) / cap
            weights += self.memory
        if req.gpu_milli and self.gpu:
            cap = np.maximum(table.gpu_usable[rows] * 1000, 1)
            total += self.gpu * (cap - table.gpu_sum[rows] + req.gpu_milli) / cap
            weights += self.gpu
        if not weights:
            return np.zeros(rows.size)
        return self.weight * np.floor(100 * np.clip(total / weights, 0, 1))


def build(arguments: Arguments, context: BuildContext) -> Binpack:
    res = context.protocol.resources
    gpu_names = {res.gpu, res.core, res.memory}
    listed = [r.strip() for r in str(arguments.get("binpack.resources", "")).split(",") if r.strip()]
    known = {"binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources"}
    for key in arguments:
        if key not in known and not key.startswith("binpack.resources."):
            raise ArgumentError(f"binpack: unknown argument {key!r}")
    gpu = 0.0
    for name in listed:
        if name in gpu_names:
            gpu = max(gpu, _weight(arguments, f"binpack.resources.{name}", 1.0))
    return Binpack(
        _weight(arguments, "binpack.weight", 1.0),
        _weight(arguments, "binpack.cpu", 1.0),
        _weight(arguments, "binpack.memory", 1.0),
        gpu,
    )
