"""The offline limit of a replay: per allocation column, an upper bound on what any packing of the
arrived pods could allocate, and a checked packing that allocates nearly that much
(docs/results/offline-bound.md).

A column is the mean allocation over the events whose arrived share rounds to it (sim/columns.py).
At event i no policy can allocate more than OPT(i), the best packing of the first i pods, and
OPT(i) never falls as pods arrive. The column's events are cut into `segments` runs at boundary
events b_0 < ... < b_S; for an event i in (b_j, b_j+1] the upper bound is min(arrived(i),
UB(b_j+1)), and the lower bound the value of the packing of b_j grown pod by pod up to i (a
packing of fewer pods stays feasible as pods arrive). UB comes from the pattern LP
(sim/bound_model.py). The packing at a boundary is the previous boundary's with the new pods
fitted in, or a MILP plan laid out (sim/offline_packing.py) when that is better; every packing
counted, grown ones included, is accepted by `feasibility.check` first. With nodes in MIG mode
(sim/mig_nodes.py) the bounds are of the other nodes' packing, the upper one plus the most the MIG
instances can hold of the arrived pods (`MigRule.capacity`): a valid upper bound (every real
packing is one of the non-MIG nodes plus what its slices hold), and the lower one leaves the
slices empty (a real packing too).
Callers: sim/runner.py (`runtimekit simulate --bound`), benchmarks/offline_bound.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import Arrivals
from runtimekit.sim.bound_model import Relaxation, build_instance
from runtimekit.sim.feasibility import InfeasiblePacking, check
from runtimekit.sim.mig_nodes import MigRule
from runtimekit.sim.offline_packing import Filler, Placement, extend, pack

HEADROOM_STEP = 0.04  # how much a class's CPU and memory are tightened when its nodes shed pods
HEADROOM_TRIES = 8
PLANS = ("every", "first", "none")
CLOSE = 2e-5  # a packing this near the upper bound (share of capacity, 0.002 points) is not improved on


@dataclass(frozen=True)
class PrefixBound:
    """Bounds for the first `pods` arrivals, in GPU milli."""

    pods: int
    arrived: int
    upper: int
    lower: int
    gpu_only_upper: int | None = None  # the bound with every CPU and memory request dropped
    whole_arrived: int = 0  # GPU milli of whole-GPU pods arrived, and placed by the packing
    whole_placed: int = 0

    def to_json(self) -> dict[str, int | None]:
        return {
            "pods": self.pods,
            "arrived_milli": self.arrived,
            "upper_milli": self.upper,
            "lower_milli": self.lower,
            "gpu_only_upper_milli": self.gpu_only_upper,
            "whole_arrived_milli": self.whole_arrived,
            "whole_placed_milli": self.whole_placed,
        }


@dataclass(frozen=True)
class ColumnBound:
    column: int
    upper: float  # % of cluster GPUs, mean over the column's events
    lower: float
    points: tuple[PrefixBound, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "upper": round(self.upper, 3),
            "lower": round(self.lower, 3),
            "points": [p.to_json() for p in self.points],
        }


@dataclass
class BoundResult:
    seed: int
    total_gpus: int
    columns: dict[str, ColumnBound] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "total_gpus": self.total_gpus,
            "columns": {k: c.to_json() for k, c in self.columns.items()},
            "seconds": round(self.seconds, 3),
        }


def column_events(arrived: Sequence[int], total_gpus: int, column: int) -> list[int]:
    """The events a column averages over, exactly as `bucket_columns` picks them."""
    pct = [round(a / total_gpus / 10) for a in arrived]
    hit = [i for i, p in enumerate(pct) if p == column]
    return hit or [i for i, p in enumerate(pct) if column - 1 <= p <= column + 1]


def prefix_bound(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    start: Sequence[Placement] = (),
    gpu_only: bool = False,
    headroom: dict[int, float] | None = None,
    plan: bool = True,
) -> tuple[PrefixBound, list[Placement]]:
    """Bounds for packing `pods`, and the packing behind the lower one: `start` (a packing of some
    of the pods) with the others fitted around it, or a MILP plan laid out when that is better.
    `headroom` (per class, see `_packing_from_plan`) is read and updated, so that later prefixes of
    the same arrivals start from what this one learnt. Without `plan` the lower bound only extends
    `start` (much quicker; the upper bound is the same)."""
    arrived = sum(p.total_gpu_milli for p in pods)
    placed = {p for p, _, _ in start}
    rest = [i for i, p in enumerate(pods) if p.num_gpu and p.gpu_milli > 0 and i not in placed]
    packing = extend(nodes, pods, start, rest)  # a packing of fewer pods, with the new ones fitted in
    lower = check(nodes, pods, packing)
    instance = build_instance(nodes, pods)
    if lower == arrived:  # everything fits: nothing to bound
        upper = arrived
    else:
        relaxation = Relaxation(instance)
        relaxation.solve_lp()
        upper = min(arrived, relaxation.upper)
        if lower < upper and plan:
            headroom = {} if headroom is None else headroom
            packing, lower = _packing_from_plan(nodes, pods, relaxation, packing, lower, upper, headroom)
    gpu_only_upper = None
    if gpu_only:
        relaxed = Relaxation(build_instance(nodes, pods, resources=False))
        relaxed.solve_lp()
        gpu_only_upper = min(arrived, relaxed.upper)
    whole = [i for i, p in enumerate(pods) if p.num_gpu and p.gpu_milli >= 1000]
    on = {p for p, _, _ in packing}
    bound = PrefixBound(
        len(pods),
        arrived,
        upper,
        lower,
        gpu_only_upper,
        sum(pods[i].total_gpu_milli for i in whole),
        sum(pods[i].total_gpu_milli for i in whole if i in on),
    )
    return bound, packing


def _packing_from_plan(
    nodes: Sequence[TraceNode],
    pods: Sequence[TracePod],
    relaxation: Relaxation,
    best: list[Placement],
    lower: int,
    upper: int,
    headroom: dict[int, float],
) -> tuple[list[Placement], int]:
    """Lay out MILP plans until one packs without shedding or comes within `CLOSE` of the upper
    bound: each try tightens the CPU and memory of the classes whose nodes could not hold their
    share of the plan (`headroom`, updated in place). The best checked packing wins."""
    close = CLOSE * sum(n.gpus for n in nodes) * 1000
    for _ in range(HEADROOM_TRIES):
        if upper - lower <= close:
            break
        plan = relaxation.solve_milp(headroom)
        shed: dict[int, int] = {}
        packing = pack(nodes, pods, relaxation.instance, plan, shed)
        value = check(nodes, pods, packing)
        if value > lower:
            best, lower = packing, value
        if not shed:
            break
        for ci in shed:
            headroom[ci] = headroom.get(ci, 1.0) - HEADROOM_STEP
    return best, lower


def _checked(nodes: Sequence[TraceNode], pods: Sequence[TracePod], filler: Filler | None) -> None:
    """Check a grown packing once it has grown all it will: every value it had on the way belongs to
    a part of it, and a part of a feasible packing is feasible."""
    if filler is not None and check(nodes, pods, filler.packing) != filler.value:
        raise InfeasiblePacking("a grown packing is not worth what it was counted at")


def bound_columns(
    nodes: Sequence[TraceNode],
    arrivals: Arrivals,
    seed: int,
    columns: Sequence[int],
    segments: int = 4,
    gpu_only: bool = False,
    plans: str = "every",
) -> BoundResult:
    """Upper and lower bounds of each column for one arrival sequence. `plans` says at which of a
    column's boundaries a MILP plan is laid out: "every", "first" (the later ones extend that
    packing), or "none" (the packing is grown pod by pod from empty: far quicker, the lower bound
    further below); the upper bound is the same."""
    if plans not in PLANS:
        raise ValueError(f"plans must be one of {', '.join(PLANS)}, got {plans!r}")
    started = time.perf_counter()
    total_gpus = sum(n.gpus for n in nodes)
    # MIG GPUs take only slices (sim/mig_nodes.py): the packing is of the other nodes, and the upper
    # bound theirs plus the most the slices can hold
    slices = MigRule(nodes)
    nodes = [n for n in nodes if not n.mig] if slices else nodes
    pods = arrivals.pods
    arrived: list[int] = []
    running = 0
    for p in pods:
        running += p.total_gpu_milli
        arrived.append(running)
    result = BoundResult(seed, total_gpus)
    headroom: dict[int, float] = {}
    for column in columns:
        events = column_events(arrived, total_gpus, column)
        if not events:
            continue
        first, last = events[0], events[-1]
        cuts = sorted({first + (last - first) * j // max(segments, 1) for j in range(max(segments, 1) + 1)})
        points: list[PrefixBound] = []
        packings: list[list[Placement]] = []
        packing: list[Placement] = []
        for cut in cuts:
            plan = plans == "every" or (plans == "first" and cut == cuts[0])
            point, packing = prefix_bound(nodes, pods[: cut + 1], packing, gpu_only, headroom, plan)
            if slices:
                point = replace(point, upper=min(point.arrived, point.upper + slices.capacity(pods[: cut + 1])))
            points.append(point)
            packings.append(packing)
        cut_last = cuts[-1]
        scale = total_gpus * 10
        ups, lows = [], []
        filler: Filler | None = None
        for i in events:
            after = next(j for j, cut in enumerate(cuts) if cut >= i)  # first boundary at or past i
            ups.append(min(arrived[i], points[after].upper) / scale)
            if i in cuts:  # a boundary's own packing, then grown pod by pod up to the next one
                _checked(nodes, pods, filler)
                filler = Filler(nodes, pods[: cut_last + 1], packings[cuts.index(i)])
            else:
                assert filler is not None
                filler.add([i])
            lows.append(filler.value / scale)
        _checked(nodes, pods, filler)
        result.columns[str(column)] = ColumnBound(column, sum(ups) / len(ups), sum(lows) / len(lows), tuple(points))
    result.seconds = time.perf_counter() - started
    return result
