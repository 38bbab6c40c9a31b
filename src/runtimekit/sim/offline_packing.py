"""A real offline packing of arrived pods: the relaxation's integer plan turned into pods on nodes and
GPUs, then every pod left over placed wherever it still fits. Its value is a lower bound on the
offline optimum once `feasibility.check` has accepted it.

Per node class, in the plan's numbers: the chosen pods of each share size are dealt to the plan's
GPU slots of that size, the largest CPU request first onto the GPU with the least CPU so far (so CPU
spreads evenly); each GPU's pods and each whole-GPU pod form a bundle, and bundles go to the node of
the class with the most free CPU that still holds them (most GPUs first). The plan respects CPU and
memory only summed over a class, so a bundle may fit no node: it sheds its largest CPU requests
until it does. Then every pod not placed yet (the plan's leftovers and the pods it did not pick) is
tried once, largest GPU demand first, on the GPU that fits it most tightly anywhere.
Callers: sim/bound.py.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.bound_model import MILLI, Instance, Plan

Placement = tuple[int, int, tuple[int, ...]]  # (pod index, node index, GPU indices on the node)


@dataclass
class _Bundle:
    gpus: int  # GPUs it needs (whole pod: its count; a shared GPU: 1)
    pods: list[int]
    cpu: int
    mem: int


class _Nodes:
    """Free CPU, memory and per-GPU milli of every node while the packing is built."""

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        width = max(n.gpus for n in nodes)
        self.cpu = np.array([n.cpu_milli for n in nodes], np.int64)
        self.mem = np.array([n.memory_mib for n in nodes], np.int64)
        self.free = np.full((len(nodes), width), -1, np.int64)
        for i, n in enumerate(nodes):
            self.free[i, : n.gpus] = MILLI
        self.model = np.array([n.model for n in nodes])

    def take(self, node: int, gpus: Sequence[int], milli: int, cpu: int, mem: int) -> None:
        self.cpu[node] -= cpu
        self.mem[node] -= mem
        for g in gpus:
            self.free[node, g] -= milli


def pack(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    instance: Instance,
    plan: Plan,
    shed: dict[int, int] | None = None,
) -> list[Placement]:
    """The packing; `shed`, when given, receives per class the GPU milli of the pods its nodes could
    not hold (before the final fill)."""
    state = _Nodes(nodes)
    out: list[Placement] = []
    pools = [list(k.pods) for k in instance.kinds]
    leftover: list[int] = []
    for ci, c in enumerate(instance.classes):
        placed = plan.placed.get(ci, {})
        chosen = {ki: [pools[ki].pop() for _ in range(min(v, len(pools[ki])))] for ki, v in placed.items()}
        bundles = _bundles(pods, instance, chosen, plan.patterns.get(ci, {}))
        lost = _place_bundles(state, pods, c.nodes, bundles, out)
        if shed is not None and lost:
            shed[ci] = sum(pods[p].total_gpu_milli for p in lost)
        leftover.extend(lost)
    rest = leftover + [p for pool in pools for p in pool]
    out.extend(_fill(state, pods, rest))
    return out


class Filler:
    """A checked-later packing grown pod by pod: each pod added goes where `_fill` puts it, if anywhere."""

    def __init__(self, nodes: Sequence[TraceNode], pods: Sequence[TracePod], packing: Sequence[Placement] = ()) -> None:
        self.pods = pods
        self.state = _Nodes(nodes)
        self.packing = list(packing)
        self.value = 0
        for p, node, gpus in packing:
            pod = pods[p]
            self.state.take(node, gpus, min(pod.gpu_milli, MILLI), pod.cpu_milli, pod.memory_mib)
            self.value += pod.total_gpu_milli

    def add(self, extra: Sequence[int]) -> None:
        placed = _fill(self.state, self.pods, [p for p in extra if self.pods[p].total_gpu_milli])
        self.packing.extend(placed)
        self.value += sum(self.pods[p].total_gpu_milli for p, _, _ in placed)


def extend(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], packing: Sequence[Placement], extra: Sequence[int]
) -> list[Placement]:
    """`packing` plus whichever of the pods `extra` still fit around it (a packing of more pods)."""
    filler = Filler(nodes, pods, packing)
    filler.add(extra)
    return filler.packing


def _bundles(
    pods: Sequence[TracePod], instance: Instance, chosen: dict[int, list[int]], patterns: dict[tuple[int, ...], int]
) -> list[_Bundle]:
    bundles: list[_Bundle] = []
    by_size: dict[int, list[int]] = {}
    for ki, ix in chosen.items():
        kind = instance.kinds[ki]
        if kind.whole:
            bundles.extend(_Bundle(kind.count, [p], kind.cpu, kind.mem) for p in ix)
        elif kind.count == 1:
            by_size.setdefault(kind.milli, []).extend(ix)
        # multi-GPU shares (none in openb) are left to the final fill
    gpus: list[_Bundle] = []
    slots: list[list[int]] = []  # per GPU: slots left per size index
    for pattern, count in patterns.items():
        for _ in range(count):
            gpus.append(_Bundle(1, [], 0, 0))
            slots.append(list(pattern))
    for s, size in sorted(enumerate(instance.sizes), key=lambda x: -x[1]):
        ix = sorted(by_size.get(size, []), key=lambda p: -pods[p].cpu_milli)
        heap = [(g.cpu, gi) for gi, g in enumerate(gpus) if slots[gi][s]]
        heapq.heapify(heap)
        for p in ix:
            if not heap:
                break  # more pods than slots cannot happen in a plan; keep the rest for the fill
            _, gi = heapq.heappop(heap)
            g = gpus[gi]
            g.pods.append(p)
            g.cpu += pods[p].cpu_milli
            g.mem += pods[p].memory_mib
            slots[gi][s] -= 1
            if slots[gi][s]:
                heapq.heappush(heap, (g.cpu, gi))
    bundles.extend(g for g in gpus if g.pods)
    return bundles


def _place_bundles(
    state: _Nodes, pods: Sequence[TracePod], members: Sequence[int], bundles: list[_Bundle], out: list[Placement]
) -> list[int]:
    """Bundles onto the class's nodes (most GPUs, then most CPU first; each to the node with the most
    free CPU that holds it); returns the pods shed."""
    rows = np.array(members, np.int64)
    shed: list[int] = []
    bundles.sort(key=lambda b: (-b.gpus, -b.cpu, -b.mem))
    for b in bundles:
        while True:
            whole = (state.free[rows] == MILLI).sum(axis=1)
            ok = (whole >= b.gpus) & (state.cpu[rows] >= b.cpu) & (state.mem[rows] >= b.mem)
            if ok.any() or not b.pods:
                break
            # no node holds it: shed the largest CPU request (a whole pod sheds itself)
            worst = max(b.pods, key=lambda p: (pods[p].cpu_milli, pods[p].memory_mib))
            b.pods.remove(worst)
            b.cpu -= pods[worst].cpu_milli
            b.mem -= pods[worst].memory_mib
            shed.append(worst)
        if not b.pods:
            continue
        cand = np.flatnonzero(ok)
        node = int(rows[cand[np.argmax(state.cpu[rows[cand]])]])
        columns = np.flatnonzero(state.free[node] == MILLI)[: b.gpus].tolist()
        for p in b.pods:
            pod = pods[p]
            milli = min(pod.gpu_milli, MILLI)
            state.take(node, columns, milli, pod.cpu_milli, pod.memory_mib)
            out.append((p, node, tuple(columns)))
    return shed


def _fill(state: _Nodes, pods: Sequence[TracePod], rest: Sequence[int]) -> list[Placement]:
    """Each pod, largest GPU demand first, onto the tightest fitting GPU(s) anywhere, if any."""
    out: list[Placement] = []
    order = sorted(rest, key=lambda p: (-pods[p].total_gpu_milli, -pods[p].cpu_milli, p))
    for p in order:
        pod = pods[p]
        milli = min(pod.gpu_milli, MILLI)
        models = pod.allowed_models()
        ok = (state.cpu >= pod.cpu_milli) & (state.mem >= pod.memory_mib)
        if models is not None:
            ok &= np.isin(state.model, list(models))
        fits = state.free >= milli  # per (node, GPU)
        enough = fits.sum(axis=1) >= pod.num_gpu
        cand = np.flatnonzero(ok & enough)
        if not cand.size:
            continue
        # tightest: least free milli left on the GPUs used, then the node with least free CPU
        free = np.where(fits[cand], state.free[cand], 10 * MILLI)
        part = np.sort(free, axis=1)[:, : pod.num_gpu].sum(axis=1)
        at = np.lexsort((state.cpu[cand], part))[0]
        node = int(cand[at])
        row = state.free[node]
        columns = sorted(np.flatnonzero(row >= milli).tolist(), key=lambda g: (row[g], g))[: pod.num_gpu]
        state.take(node, columns, milli, pod.cpu_milli, pod.memory_mib)
        out.append((p, node, tuple(columns)))
    return out
