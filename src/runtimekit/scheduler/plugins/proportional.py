"""Volcano's proportional check, shared by `predicates` (`predicate.ProportionalEnable`) and
`resource-strategy-fit` (`proportional`): a pod that asks for none of the listed scarce resources must
leave, on a node, the CPU and memory that node's idle units of them are entitled to (CPUs and GB per
idle unit). The protocol's GPU names count whole free GPUs as idle units."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from runtimekit.model import NodeTable, PodRequest
from runtimekit.scheduler.framework.values import Mask, Rows


def proportional_shortfalls(
    table: NodeTable,
    rows: Rows,
    request: PodRequest,
    rates: Mapping[str, tuple[float, float]],
    gpu_names: Collection[str],
) -> list[tuple[str, Mask]]:
    """Per listed resource (in `rates`' order), the rows it is the first to fail; [] for a pod that asks
    for one of the resources."""
    asked = dict(request.scalars)
    if any(asked.get(name, 0) > 0 for name in rates) or (request.uses_gpu and any(n in rates for n in gpu_names)):
        return []
    cpu_left = table.cpu_free[rows] - request.cpu_milli
    mem_left = table.mem_free[rows] - request.memory_bytes
    failed: list[tuple[str, Mask]] = []
    short_any = np.zeros(rows.size, np.bool_)
    for name, (cpu_rate, mem_rate) in rates.items():
        column = table.gpu_whole if name in gpu_names else table.scalar_free.get(name)
        if column is None:
            continue
        idle = column[rows].astype(np.float64)
        short = ~short_any & ((cpu_left < idle * cpu_rate * 1000) | (mem_left < idle * mem_rate * 1e9))
        if short.any():
            failed.append((name, short))
            short_any |= short
    return failed
