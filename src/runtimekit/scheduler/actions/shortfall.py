"""Why a gang does not fit, in words a user can act on: how many of its tasks could be placed, what
the others need, and the most the cluster had left for them at that point (e.g. "3/5 tasks placed;
2 need 8 whole GPUs each, largest free block 4"). Pure functions over the session's node table;
callers: the allocate action, when a gang's trial placement is discarded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from runtimekit.model import GpuKind, NodeTable, PodRequest
from runtimekit.scheduler.framework.info import TaskInfo

MIB = 1 << 20


def describe_need(request: PodRequest) -> str:
    """What one task asks for, the GPUs first ("8 whole GPUs", "30% of a GPU", "2 CPUs")."""
    parts = []
    for container in request.gpus:
        gpu = container.gpu
        if gpu.kind is GpuKind.WHOLE:
            parts.append(f"{gpu.count} whole GPU{'s' if gpu.count > 1 else ''}")
        elif gpu.kind is GpuKind.MIG:
            parts.append(f"{gpu.count} {gpu.mig_profile} MIG slice{'s' if gpu.count > 1 else ''}")
        else:
            share = f"{gpu.core_milli / 10:g}% of a GPU"
            parts.append(share if gpu.count == 1 else f"{share} on {gpu.count} GPUs")
    if not parts:
        mib, rest = divmod(request.memory_bytes, MIB)
        parts.append(
            f"{request.cpu_milli / 1000:g} CPUs and {mib if not rest else round(request.memory_bytes / MIB, 1)} MiB"
        )
    parts.extend(f"{amount} {name}" for name, amount in request.scalars)
    return " + ".join(parts)


def largest_free(table: NodeTable, request: PodRequest) -> str:
    """The most the table has left on one node for the kind of thing the request needs most."""
    rows = table.active_rows()
    if rows.size == 0:
        return "no node"
    kinds = {c.gpu.kind for c in request.gpus}
    if GpuKind.WHOLE in kinds:
        return f"largest free block {int(np.max(table.gpu_whole[rows]))}"
    if GpuKind.SHARE in kinds:
        return f"most free on one GPU {max(0, int(np.max(table.gpu_max[rows]))) / 10:g}%"
    if GpuKind.MIG in kinds:
        return "no free slot of that profile"
    return f"most free CPU on one node {int(np.max(table.cpu_free[rows])) / 1000:g}"


def about_room(reasons: Iterable[str]) -> bool:
    """Whether a member's per-node reasons are all about room (resources, GPUs, pod slots), so the
    shortfall says it all; kube-scheduler phrases every placement constraint "node(s) ..." (taints,
    node affinity, host ports, topology spread, inter-pod affinity), and those the member's own
    message must tell."""
    return not any(reason.startswith("node(s)") for reason in reasons)


def gang_shortfall(table: NodeTable, placed: int, total: int, unplaced: Sequence[TaskInfo]) -> str:
    """The gang's shortfall as of `table` (with its placed tasks still on it)."""
    needs = Counter(describe_need(t.request) for t in unplaced)
    parts = [f"{n} need{'' if n > 1 else 's'} {need}{' each' if n > 1 else ''}" for need, n in needs.items()]
    tail = f", {largest_free(table, unplaced[0].request)}" if unplaced else ""
    return f"{placed}/{total} tasks placed; " + "; ".join(parts) + tail
