"""Two narrower limits than the offline bound, both from the same pattern LP (sim/bound_model.py)
with some pods' placement required (docs/results/offline-bound.md, "Limits with a floor"):

* **The floor limit**: the most any policy can allocate at a column while never falling more than
  `slack` points behind a reference policy's replay (fgd's, say) at any earlier column. The offline
  optimum reaches its figure by dropping pods early on; a policy held to fgd's floor may not, since
  fgd places everything until the cluster is nearly full.
* **The set limit**: the most a packing can allocate when it must keep every pod that one policy's
  replay had placed by then (it may move them): what is left above the policy's own figure is lost
  to *where* it placed its pods, and the rest of the gap to the offline bound to *which* pods it
  took. The LP behind it also says which pods, beyond the kept ones, packing them anew makes room
  for (`SetLimit.added`; an LP solution, so fractional counts, summed as GPU milli per kind).

Why the floor is a valid constraint: let column c's events be e_0 < ... < e_m (sim/columns.py).
A policy's allocation U never falls and grows at most by the arrivals, so its column mean is at most
U(e_0) + mean(A(e_j)) - A(e_0). If that mean is at least R(c) - slack (R: the reference's column
mean), then U(e_0) >= L(c) = R(c) - slack - (mean(A(e_j)) - A(e_0)): the GPU pods the policy placed
among the first e_0 + 1 arrivals are worth at least L(c). Pods of a kind are interchangeable, so in
the LP the kept pods of kind k give placed_k >= kept_k - d_k with sum(value_k d_k) <= (value of
the kept pods) - L(c); every packing meeting the floor is a solution of that LP with the same value.
Each column's floor gives a valid limit alone, so the smallest over a few columns around where the
reference first fails (the floor binds hardest there) is reported. The limit of a column is taken
at its last event and applies to each of its events capped by what has arrived (the optimum never
falls as pods arrive). The slack is per seed: `benchmarks/better_than_fgd.py` asks the mean over
ten seeds to be within 0.05, so one seed alone could fall up to 0.5 behind.
Callers: benchmarks/offline_bound.py, tests.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.bound import column_events
from runtimekit.sim.bound_model import PodKind, Relaxation, build_instance

CANDIDATES = 2  # columns each side of the reference's first failure whose floors are tried


@dataclass(frozen=True)
class FloorBound:
    column: int
    upper: float  # % of cluster GPUs, mean over the column's events
    floor_column: int  # the column whose floor gave it


def kept_relaxation(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], kept: Iterable[int], floor: int, cpu_only: bool = False
) -> Relaxation:
    """The pattern LP (not yet solved) of packing `pods` so that the GPU pods of `kept` (indices into
    `pods`) that are placed are worth at least `floor` milli. With `cpu_only` the CPU-only pods of
    `kept` must all be placed too (they are worth nothing, so only a `floor` of everything keeps them)."""
    instance = build_instance(nodes, pods, cpu_only=cpu_only)
    kind_of = {i: ki for ki, kind in enumerate(instance.kinds) for i in kind.pods}
    keep = [0] * len(instance.kinds)
    for i in kept:
        if i in kind_of:
            keep[kind_of[i]] += 1
    kept_value = sum(instance.kinds[ki].value * n for ki, n in enumerate(keep))
    return Relaxation(instance, keep=tuple(keep), slack=max(0, kept_value - floor))


def kept_upper(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], kept: Iterable[int], floor: int, cpu_only: bool = False
) -> int:
    """An upper bound (GPU milli) on any packing of `pods` meeting `kept_relaxation`'s requirement."""
    relaxation = kept_relaxation(nodes, pods, kept, floor, cpu_only)
    relaxation.solve_lp()
    return min(sum(p.total_gpu_milli for p in pods), relaxation.upper)


@dataclass(frozen=True)
class SetLimit:
    upper: int  # GPU milli: no packing keeping the pods does better
    added: dict[str, int]  # GPU milli the LP behind it places beyond the kept pods, per kind ("1 GPU", "share 370")


@dataclass(frozen=True)
class SetColumn:
    upper: float  # % of cluster GPUs, mean over the column's events
    added: dict[str, int]  # `SetLimit.added` at the column's last event


def kind_label(kind: PodKind) -> str:
    if kind.whole:
        return "1 GPU" if kind.count == 1 else f"{kind.count} GPUs"
    return f"share {kind.milli}" if kind.count == 1 else f"{kind.count} x share {kind.milli}"


def set_limit(nodes: Sequence[TraceNode], pods: Sequence[TracePod], placed: Iterable[int]) -> SetLimit:
    """An upper bound (GPU milli) on any packing of `pods` that keeps every pod of `placed`, and which
    pods beyond them the LP that gives it places: what the kept pods, packed anew, leave room for."""
    placed = list(placed)
    relaxation = kept_relaxation(nodes, pods, placed, sum(pods[i].total_gpu_milli for i in placed), cpu_only=True)
    relaxation.solve_lp()
    added: dict[str, float] = defaultdict(float)
    for ki, n in relaxation.placed.items():
        kind = relaxation.instance.kinds[ki]
        if kind.value:
            added[kind_label(kind)] += max(0.0, n - relaxation.keep[ki]) * kind.value
    upper = min(sum(p.total_gpu_milli for p in pods), relaxation.upper)
    ranked = sorted(added.items(), key=lambda item: -item[1])
    return SetLimit(upper, {label: round(v) for label, v in ranked if round(v)})


def set_upper(nodes: Sequence[TraceNode], pods: Sequence[TracePod], placed: Iterable[int]) -> int:
    """An upper bound (GPU milli) on any packing of `pods` that keeps every pod of `placed`."""
    return set_limit(nodes, pods, placed).upper


def set_columns(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], placed: Iterable[int], columns: Sequence[int]
) -> dict[str, SetColumn]:
    """Per column, the set limit of a replay that placed `placed` (ReplayResult.placed): the pods it
    had placed by the column's last event kept, packed anew (% of cluster GPUs, mean over the events),
    and the pods the limit adds to them there."""
    _no_mig(nodes)
    total_gpus = sum(n.gpus for n in nodes)
    arrived = list(accumulate(p.total_gpu_milli for p in pods))
    placed = sorted(placed)
    out: dict[str, SetColumn] = {}
    for column in columns:
        events = column_events(arrived, total_gpus, column)
        if events:
            last = events[-1]
            limit = set_limit(nodes, pods[: last + 1], [i for i in placed if i <= last])
            out[str(column)] = SetColumn(_capped_mean(arrived, events, limit.upper, total_gpus), limit.added)
    return out


def _no_mig(nodes: Sequence[TraceNode]) -> None:
    """The floor and set limits pack every GPU as a plain one; with MIG GPUs they would not bound."""
    if any(n.mig for n in nodes):
        raise ValueError("the floor and set limits do not know nodes in MIG mode (sim/bound.py's bound does)")


def _capped_mean(arrived: Sequence[int], events: Sequence[int], upper: int, total_gpus: int) -> float:
    """A limit worked out at a column's last event, for each of its events (capped by what had arrived
    then: the optimum never falls as pods arrive), as the column's mean in % of the cluster's GPUs."""
    return sum(min(arrived[i], upper) for i in events) / len(events) / (total_gpus * 10)


def floor_columns(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    reference_used: Sequence[int],
    columns: Sequence[int],
    slack: float = 0.05,
    first: int = 50,
) -> dict[str, FloorBound]:
    """Per column, the floor limit for a policy within `slack` points of the reference (its running
    allocation, ReplayResult.used_milli, over the same arrivals) at every column from `first` on."""
    _no_mig(nodes)
    total_gpus = sum(n.gpus for n in nodes)
    scale = total_gpus * 10  # milli per point
    arrived = list(accumulate(p.total_gpu_milli for p in pods))
    fails = next((i for i, (a, u) in enumerate(zip(arrived, reference_used, strict=True)) if u < a), len(pods) - 1)
    failing_column = round(arrived[fails] / scale)
    out: dict[str, FloorBound] = {}
    for column in columns:
        events = column_events(arrived, total_gpus, column)
        if not events:
            continue
        last = events[-1]
        tried = [c for c in range(failing_column - CANDIDATES, failing_column + CANDIDATES + 1) if first <= c <= column]
        best, best_column = arrived[last], column
        for c in tried or [max(first, min(column, failing_column))]:
            floor_events = column_events(arrived, total_gpus, c)
            if not floor_events or floor_events[0] > last:
                continue
            start = floor_events[0]
            reference = sum(reference_used[i] for i in floor_events) / len(floor_events)
            ahead = sum(arrived[i] for i in floor_events) / len(floor_events) - arrived[start]
            floor = math.floor(reference - slack * scale - ahead)
            upper = kept_upper(nodes, pods[: last + 1], range(start + 1), floor)
            if upper < best:
                best, best_column = upper, c
        out[str(column)] = FloorBound(column, _capped_mean(arrived, events, best, total_gpus), best_column)
    return out
