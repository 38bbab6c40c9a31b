"""The offline packing problem of a set of arrived pods, and its pattern LP / MILP relaxation.

Problem: choose a subset of the pods and place it on the nodes (CPU, memory, per-GPU milli, whole
GPUs exclusive, GPU model allowed) so that the placed GPU milli is largest. The relaxation below
keeps the GPU side exact and weakens the rest; every step is a valid relaxation (any real packing
gives a solution of the model with the same value), so its LP optimum is an upper bound:

  * CPU-only pods are left out: they add nothing to the objective and only take room, so dropping
    them from any packing keeps it feasible with the same value.
  * A pod that no empty node of any class can host (CPU, memory, model, GPU count) is left out.
  * Nodes are grouped into classes (GPU model, GPUs per node, CPU, memory). Per class c with n_c
    nodes of g_c GPUs: the GPUs carrying share pods and the whole-GPU pods' GPUs together are at
    most n_c g_c. Whole pods ask 1, 2, 4 or 8 GPUs and nodes have 1, 2, 4 or 8, so whole pods that
    fit by count also fit node by node (divisible sizes: largest first leaves no holes); where a
    pod asks more GPUs than a node has, it may not use the class at all.
  * Each GPU carrying share pods follows a pattern: how many slots of each share size it has, the
    sizes summing to at most 1000 milli. Share pods of size m placed in the class are at most the
    slots of size m there. (A multi-GPU share pod, absent from openb, counts as k slots of size m:
    dropping "on distinct GPUs of one node" only relaxes.)
  * CPU and memory are summed over the class: the pods placed in class c use at most n_c times a
    node's CPU and memory (per-node limits summed).
  * Pods of a kind (CPU, memory, GPU demand, models) are interchangeable: at most as many placed
    as arrived.

Objective: sum of the placed pods' GPU milli. The LP over all patterns is solved by column
generation (pricing: an unbounded knapsack over the share sizes per class, exact by dynamic
programming); the bound reported is the Lagrangian bound of the restricted LP plus, per class,
n_c g_c times the best pattern's positive reduced profit, which is valid at every iteration and
equals the LP optimum once no pattern prices out. The MILP over the generated patterns gives an
integer plan (how many GPUs of each class carry each pattern, which kinds go where), which
`offline_packing` turns into a real packing. Callers: sim/bound.py.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from runtimekit.model.knapsack import best_pattern
from runtimekit.model.trace import TraceNode, TracePod

if TYPE_CHECKING:  # scipy is imported when a bound is solved, not with the simulator
    from scipy.sparse import coo_matrix

MILLI = 1000
PRESSURE = 0.01  # the plan's cost of a pod's CPU and memory share of a node (see `solve_milp`)
EXCESS = 10.0  # objective per milli of kept pods dropped beyond the slack: keeps the restricted LP feasible
REDUCED_EPS = 1e-7  # a pattern enters the LP when its reduced profit beats this (relative to MILLI)


@dataclass(frozen=True)
class NodeClass:
    model: str
    gpus: int
    cpu: int
    mem: int
    nodes: tuple[int, ...]  # indices into the node list

    @property
    def size(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class PodKind:
    """Interchangeable pods: same CPU, memory, GPU demand and allowed models."""

    cpu: int
    mem: int
    count: int  # GPUs
    milli: int  # per GPU
    models: frozenset[str] | None
    pods: tuple[int, ...]  # indices into the pod sequence

    @property
    def whole(self) -> bool:
        return self.milli >= MILLI

    @property
    def value(self) -> int:
        return self.count * min(self.milli, MILLI)

    def fits_class(self, c: NodeClass) -> bool:
        return (
            self.count <= c.gpus
            and self.cpu <= c.cpu
            and self.mem <= c.mem
            and (self.models is None or c.model in self.models)
        )


@dataclass(frozen=True)
class Instance:
    classes: tuple[NodeClass, ...]
    kinds: tuple[PodKind, ...]  # GPU pods only, each hostable by at least one class
    sizes: tuple[int, ...]  # distinct share sizes (milli), ascending
    grain: int  # every value and size is a multiple of it
    left_out: tuple[int, ...]  # pod indices no empty node can host (GPU pods)


def node_classes(nodes: Sequence[TraceNode]) -> tuple[NodeClass, ...]:
    groups: dict[tuple[str, int, int, int], list[int]] = defaultdict(list)
    for i, n in enumerate(nodes):
        if n.gpus:
            groups[(n.model, n.gpus, n.cpu_milli, n.memory_mib)].append(i)
    return tuple(NodeClass(m, g, c, mem, tuple(ix)) for (m, g, c, mem), ix in sorted(groups.items()))


def build_instance(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], resources: bool = True, cpu_only: bool = False
) -> Instance:
    """The instance of the pods (indices into `pods`). Without `resources` every pod asks no CPU and
    no memory: the GPU side alone, to see whether CPU and memory change the bound. With `cpu_only`
    the CPU-only pods are kinds too (no GPU, worth nothing), for a model that must keep some of them
    (sim/floor_bound.py); such an instance is for the LP bound only, not for laying out a plan."""
    classes = node_classes(nodes)
    groups: dict[tuple[int, int, int, int, frozenset[str] | None], list[int]] = defaultdict(list)
    for i, p in enumerate(pods):
        cpu, mem = (p.cpu_milli, p.memory_mib) if resources else (0, 0)
        if p.num_gpu and p.gpu_milli > 0:
            groups[(cpu, mem, p.num_gpu, min(p.gpu_milli, MILLI), p.allowed_models())].append(i)
        elif cpu_only:
            groups[(cpu, mem, 0, 0, None)].append(i)
    kinds, left_out = [], []
    for (cpu, mem, count, milli, models), ix in groups.items():
        kind = PodKind(cpu, mem, count, milli, models, tuple(ix))
        if any(kind.fits_class(c) for c in classes):
            kinds.append(kind)
        else:
            left_out.extend(ix)
    kinds.sort(key=lambda k: (k.count, k.milli, k.cpu, k.mem, sorted(k.models or ())))
    sizes = tuple(sorted({k.milli for k in kinds if k.count and not k.whole}))
    grain = math.gcd(MILLI, *sizes) if sizes else MILLI
    return Instance(classes, tuple(kinds), sizes, grain, tuple(sorted(left_out)))


@dataclass(frozen=True)
class Rows:
    """Where each group of rows of the LP starts: gpu[c], slot[c, s] (class-major), cpu[c], mem[c],
    supply[k], then, with kept pods, keep[j] per kept kind and one slack row; `total` rows in all."""

    gpu: int
    slot: int
    cpu: int
    mem: int
    supply: int
    keep: int
    slack: int
    total: int

    @classmethod
    def of(cls, classes: int, sizes: int, kinds: int, kept: int) -> Rows:
        cpu = classes + classes * sizes
        mem = cpu + classes
        supply = mem + classes
        keep = supply + kinds
        slack = keep + kept
        return cls(0, classes, cpu, mem, supply, keep, slack, slack + 1 if kept else keep)


@dataclass
class Plan:
    """An integer plan of the relaxation: per class, GPUs per pattern and pods per kind."""

    patterns: dict[int, dict[tuple[int, ...], int]] = field(default_factory=dict)  # class -> pattern -> GPUs
    placed: dict[int, dict[int, int]] = field(default_factory=dict)  # class -> kind -> pods
    value: int = 0


@dataclass
class Relaxation:
    """The pattern LP / MILP of one instance."""

    instance: Instance
    patterns: list[list[tuple[int, ...]]] = field(default_factory=list)  # per class
    lp_value: float = 0.0
    upper: int = 0  # the valid upper bound, milli, a multiple of the grain
    iterations: int = 0
    keep: tuple[int, ...] = ()  # per kind: how many must be placed, less what `slack` lets go
    slack: int = 0  # milli of the kept pods that may be dropped after all
    placed: dict[int, float] = field(default_factory=dict)  # per kind: pods the last LP placed (fractional)

    def __post_init__(self) -> None:
        inst = self.instance
        self._var: list[tuple[str, int, int]] = []  # ('u', class, kind) for placements
        for ci, c in enumerate(inst.classes):
            for ki, k in enumerate(inst.kinds):
                if k.fits_class(c):
                    self._var.append(("u", ci, ki))
        self._kept = [ki for ki, n in enumerate(self.keep) if n > 0]
        self._rows = Rows.of(len(inst.classes), len(inst.sizes), len(inst.kinds), len(self._kept))
        if not self.patterns:
            self.patterns = [self._start_patterns(ci) for ci in range(len(inst.classes))]

    def _class_sizes(self, ci: int) -> list[int]:
        """Indices into `sizes` of the share sizes some kind hostable in the class has."""
        inst = self.instance
        c = inst.classes[ci]
        found = {inst.sizes.index(k.milli) for k in inst.kinds if k.count and not k.whole and k.fits_class(c)}
        return sorted(found)

    def _start_patterns(self, ci: int) -> list[tuple[int, ...]]:
        out = []
        for j in self._class_sizes(ci):
            slots = [0] * len(self.instance.sizes)
            slots[j] = MILLI // self.instance.sizes[j]
            out.append(tuple(slots))
        return out

    # -- the model --------------------------------------------------------------------------
    def _matrix(
        self, headroom: dict[int, float] | None = None
    ) -> tuple[np.ndarray, coo_matrix, np.ndarray, list[tuple[str, int, int]]]:
        """(objective to maximise, A, b) for A x <= b, and what each column is. `headroom` scales a
        class's CPU and memory sums down (for building a packing, never for the bound)."""
        from scipy.sparse import coo_matrix

        inst = self.instance
        columns = list(self._var)
        for ci, pats in enumerate(self.patterns):
            columns.extend(("z", ci, pi) for pi in range(len(pats)))
        columns.extend(("d", -1, ki) for ki in self._kept)
        if self._kept:
            columns.append(("e", -1, 0))
        ns, rows = len(inst.sizes), self._rows
        r_gpu, r_slot, r_cpu, r_mem, r_sup, r_slack = rows.gpu, rows.slot, rows.cpu, rows.mem, rows.supply, rows.slack
        r_keep = {ki: rows.keep + j for j, ki in enumerate(self._kept)}
        data: list[float] = []
        ri: list[int] = []
        cj: list[int] = []
        obj = np.zeros(len(columns))
        for j, (what, ci, x) in enumerate(columns):
            if what == "u":
                k = inst.kinds[x]
                obj[j] = k.value
                entries = [(r_cpu + ci, k.cpu), (r_mem + ci, k.mem), (r_sup + x, 1)]
                if x in r_keep:
                    entries.append((r_keep[x], -1))
                if not k.count:  # a CPU-only pod (see build_instance's `cpu_only`)
                    pass
                elif k.whole:
                    entries.append((r_gpu + ci, k.count))
                else:
                    entries.append((r_slot + ci * ns + inst.sizes.index(k.milli), k.count))
            elif what == "d" and inst.kinds[x].value:  # kept pods of kind x dropped after all, paid from the slack
                entries = [(r_keep[x], -1), (r_slack, inst.kinds[x].value)]
            elif what == "d":  # a kept pod worth nothing (CPU only) dropped: no slack pays for it, a penalty does
                obj[j] = -EXCESS * MILLI
                entries = [(r_keep[x], -1)]
            elif what == "e":  # drops beyond the slack, at a penalty (see `EXCESS`)
                obj[j] = -EXCESS
                entries = [(r_slack, -1)]
            else:
                slots = self.patterns[ci][x]
                entries = [(r_gpu + ci, 1)] + [(r_slot + ci * ns + s, -a) for s, a in enumerate(slots) if a]
            for r, v in entries:
                ri.append(r)
                cj.append(j)
                data.append(float(v))
        b = np.zeros(rows.total)
        for ci, c in enumerate(inst.classes):
            b[r_gpu + ci] = c.size * c.gpus
            keep = (headroom or {}).get(ci, 1.0)
            b[r_cpu + ci] = math.floor(keep * c.size * c.cpu)
            b[r_mem + ci] = math.floor(keep * c.size * c.mem)
        for ki, k in enumerate(inst.kinds):
            b[r_sup + ki] = len(k.pods)
        for ki, r in r_keep.items():
            b[r] = -self.keep[ki]
        if self._kept:
            b[r_slack] = self.slack
        a = coo_matrix((data, (ri, cj)), shape=(rows.total, len(columns)))
        return obj, a, b, columns

    def solve_lp(self, max_iterations: int = 200) -> float:
        """Column generation to LP optimality; sets `lp_value`, `upper` (a valid bound) and `placed` (the
        last restricted LP's pods per kind: an optimal solution once no pattern prices out)."""
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix

        inst = self.instance
        if not inst.kinds:  # no pod fits any node
            self.lp_value, self.upper, self.placed = 0.0, 0, {}
            return 0.0
        nc, ns = len(inst.classes), len(inst.sizes)
        best_bound = math.inf
        solution = np.zeros(0)
        for it in range(max_iterations):
            obj, a, b, _ = self._matrix()
            # scale CPU/memory rows so HiGHS sees numbers of similar size (duals rescaled below)
            scale = np.ones(b.size)
            for r0 in (self._rows.cpu, self._rows.mem):
                scale[r0 : r0 + nc] = 1.0 / np.maximum(b[r0 : r0 + nc], 1.0)
            a_s = coo_matrix((a.data * scale[a.row], (a.row, a.col)), shape=a.shape).tocsr()
            res = linprog(-obj, A_ub=a_s, b_ub=b * scale, bounds=(0, None), method="highs")
            if res.status != 0:
                raise RuntimeError(f"offline bound: the LP failed ({res.message})")
            value = -float(res.fun)
            solution = res.x
            duals = np.maximum(-np.asarray(res.ineqlin.marginals) * scale, 0.0)  # per unit of the original rows
            added = 0
            delta = np.zeros(nc)  # per class: how far the best pattern violates its dual constraint
            for ci in range(nc):
                allowed = self._class_sizes(ci)
                if not allowed:
                    continue
                profit = [0.0] * ns
                for s in allowed:
                    profit[s] = duals[self._rows.slot + ci * ns + s]
                gpu_price = duals[self._rows.gpu + ci]
                got, slots = best_pattern(profit, inst.sizes, inst.grain)
                delta[ci] = max(0.0, got - gpu_price)
                if got - gpu_price > REDUCED_EPS * MILLI and slots not in self.patterns[ci]:
                    self.patterns[ci].append(slots)
                    added += 1
            best_bound = min(best_bound, self._dual_bound(obj, a, b, duals, delta))
            self.iterations = it + 1
            self.lp_value = value
            if not added:
                break
        self.placed = self._placed_by_kind(solution)
        g = inst.grain
        # a small tolerance against the solver's rounding, then down to the grain (values are multiples)
        self.upper = math.floor((best_bound + 1e-6 * max(1.0, best_bound)) / g + 1e-9) * g
        return best_bound

    def _placed_by_kind(self, x: np.ndarray) -> dict[int, float]:
        """Per kind, the pods the LP solution `x` places over all classes (kinds it places none of left out;
        nothing where no LP was solved, `x` empty)."""
        out: dict[int, float] = defaultdict(float)
        for (_, _, ki), v in zip(self._var, x[: len(self._var)].tolist(), strict=False):
            if v > 0:
                out[ki] += v
        return dict(out)

    def _dual_bound(self, obj: np.ndarray, a: coo_matrix, b: np.ndarray, duals: np.ndarray, delta: np.ndarray) -> float:
        """b.y of a dual-feasible y made from the LP's duals: each class's GPU price raised by its
        best pattern's excess (`delta`), then each kind's supply price by whatever its placement
        columns still miss (solver tolerance). Weak duality makes it an upper bound of the LP over
        every pattern, hence of every packing."""
        inst, rows = self.instance, self._rows
        y = duals.copy()
        y[rows.gpu : rows.gpu + len(inst.classes)] += delta
        r_sup = rows.supply
        n_var = len(self._var)
        if self._kept:
            # a drop column (objective 0) is covered once the slack's price pays its keep price, the
            # excess column (-EXCESS) while the slack's price is at most EXCESS; lowering a keep price
            # only helps the placement columns (they have -1 there)
            r_keep, r_slack = rows.keep, rows.slack
            values = np.array([inst.kinds[ki].value for ki in self._kept], np.float64)
            paid = values > 0
            prices = y[r_keep:r_slack]  # a view: the caps below write through
            if paid.any():
                y[r_slack] = min(EXCESS, max(y[r_slack], float(np.max(prices[paid] / values[paid]))))
            prices[:] = np.where(paid, np.minimum(prices, y[r_slack] * values), np.minimum(prices, EXCESS * MILLI))
        covered = np.zeros(a.shape[1])
        np.add.at(covered, a.col, a.data * y[a.row])
        short = np.maximum(obj[:n_var] - covered[:n_var], 0.0)  # placement columns only
        for j, (_, _, ki) in enumerate(self._var):
            if short[j] > 0:
                y[r_sup + ki] = max(y[r_sup + ki], duals[r_sup + ki] + short[j])
        return float(b @ y)

    def solve_milp(
        self,
        headroom: dict[int, float] | None = None,
        pressure: float = PRESSURE,
        time_limit: float = 60.0,
        gap: float = 1e-5,
    ) -> Plan:
        """The integer plan over the generated patterns (a feasible point of the relaxation, with each
        class's CPU and memory sums scaled by `headroom`). Among plans of about the same value it
        prefers those that leave nodes CPU and memory: each placed pod costs `pressure` x 1000 x
        (its share of a node's CPU plus its share of a node's memory) x the node's GPUs, so pods
        asking much CPU go where CPU is plentiful and the plan can be laid out node by node."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        inst = self.instance
        if not inst.kinds:
            return Plan()
        obj, a, b, columns = self._matrix(headroom)
        cost = obj.copy()
        for j, (what, ci, x) in enumerate(columns):
            if what == "u":
                c, k = inst.classes[ci], inst.kinds[x]
                cost[j] -= pressure * MILLI * c.gpus * (k.cpu / c.cpu + k.mem / c.mem)
        res = milp(
            -cost,
            constraints=LinearConstraint(a.tocsr(), -np.inf, b),
            integrality=np.ones(obj.size),
            bounds=Bounds(0, np.inf),
            options={"time_limit": time_limit, "mip_rel_gap": gap, "disp": False},
        )
        if res.x is None:
            raise RuntimeError(f"offline bound: the MILP found no solution ({res.message})")
        plan = Plan()
        for (what, ci, x), v in zip(columns, np.round(res.x).astype(np.int64).tolist(), strict=True):
            if v <= 0 or what in ("d", "e"):
                continue
            if what == "u":
                plan.placed.setdefault(ci, {})[x] = v
                plan.value += v * inst.kinds[x].value
            else:
                plan.patterns.setdefault(ci, {})[self.patterns[ci][x]] = v
        return plan
