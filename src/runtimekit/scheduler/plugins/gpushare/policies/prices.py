"""Share prices: what each share size of the learned workload is worth when GPUs are scarce, and how
much a placement of a share wastes against the best way to fill GPUs with that workload.

The prices come from the pattern LP of the offline bound (docs/results/offline-bound.md), reduced to
one pool of GPUs and the single-GPU shares: `POOL` pods drawn in the workload's proportions, as many
GPUs as their milli make whole (so the pool is full, as the cluster is near full load), every GPU
filled by a pattern of shares summing to at most 1000 milli; maximise the milli placed. Column
generation (HiGHS through scipy; a pattern enters when the unbounded knapsack over the prices beats
the GPU's price) gives the dual price y_m of a slot of size m. With V(g) the best fill of g milli at
those prices (model/knapsack.py), putting a share of size m on a GPU with g free has the reduced cost

    waste(m, g) = V(g) - V(g - m) - y_m  >=  0,

zero when the share goes where some optimal pattern would put it (a 320 on a GPU holding a 650,
or on a fresh GPU that three 320s will fill) and positive where it leaves a gap the workload fills
badly (a 320 beside a 470 leaves 210, which only the rare pods under 200 milli can use). packfrag
adds it, weighted, to a placement's loss (packfrag.py; docs/results/better-than-fgd.md, design
item 8); `SharePricer` keeps the prices current as the learned workload changes. Callers: packfrag.
"""

from __future__ import annotations

import importlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from runtimekit.model import MILLI
from runtimekit.model.knapsack import best_pattern, fill_table
from runtimekit.scheduler.plugins.gpushare.policies.base import PodShape
from runtimekit.scheduler.plugins.gpushare.policies.workload import TargetWorkload

POOL = 2000  # pods in the priced pool: enough that every size of 1 in 2,000 pods counts
ROUNDS = 100  # column generation rounds at most (a few dozen suffice)
ENTER = 1e-7 * MILLI  # a pattern enters when it beats the GPU's price by this much
PRICE_WEIGHT = 16.0  # packfrag's milli of loss per milli of a share placement's waste
PRICE_AFTER = 256  # pods learned before shares are priced (a smaller sample prices noise)
PRICE_DRIFT = 0.05  # prices are worked out again when this share of the demand has moved since


@dataclass(frozen=True)
class SharePrices:
    price: Mapping[int, float]  # y_m per share size (milli)
    fill: tuple[float, ...]  # V: the best fill at those prices, per `grain` milli of room
    grain: int
    patterns: tuple[Mapping[int, int], ...] = ()  # the LP's patterns (size -> slots), to start the next from

    def waste(self, milli: int, free: int) -> float:
        """The reduced cost of a share of `milli` on a GPU with `free` milli free (0 for a size the
        workload does not have, or one that does not fit)."""
        return self.waste_table(milli)[min(free, MILLI)]

    def waste_table(self, milli: int) -> list[float]:
        """waste(milli, g) for g = 0..1000, for lookups by a GPU's free milli."""
        price = self.price.get(milli)
        if price is None:
            return [0.0] * (MILLI + 1)
        fill = np.asarray(self.fill)
        free = np.arange(MILLI + 1)
        fits = free >= milli
        rest = np.where(fits, free - milli, 0)
        table = np.where(fits, fill[free // self.grain] - fill[rest // self.grain] - price, 0.0)
        out: list[float] = np.maximum(table, 0.0).tolist()
        return out


def share_prices(demand: Mapping[int, float], start: Sequence[Mapping[int, int]] = ()) -> SharePrices | None:
    """The prices of a workload's single-GPU shares, `demand` giving each size's share of the pods
    (any scale); None when fewer than two sizes (nothing to choose between). `start`: patterns of
    an earlier solve (the previous prices' `patterns`) to begin with, so that a workload that moved a
    little takes a round or two of column generation instead of a dozen."""
    sizes = sorted(m for m, p in demand.items() if 0 < m < MILLI and p > 0)
    if len(sizes) < 2:
        return None
    from scipy.optimize import linprog  # the scheduler needs scipy only here (imported at start-up: `load_solver`)

    total = sum(demand[m] for m in sizes)
    supply = np.array([max(1, round(POOL * demand[m] / total)) for m in sizes], np.float64)
    gpus = math.ceil(float(supply @ np.array(sizes, np.float64)) / MILLI)
    grain = math.gcd(MILLI, *sizes)
    n = len(sizes)
    # start: each size alone on a GPU, and the earlier patterns whose sizes are all still here
    patterns = [tuple(MILLI // s if j == i else 0 for j in range(n)) for i, s in enumerate(sizes)]
    for earlier in start:
        if earlier.keys() <= set(sizes):
            slots = tuple(earlier.get(m, 0) for m in sizes)
            if slots not in patterns:
                patterns.append(slots)
    slot_prices = np.zeros(n)
    for _ in range(ROUNDS):
        # columns: x_m (placed, value m), then z_p (GPUs on pattern p); rows: gpu, slot[m], supply[m]
        k = len(patterns)
        a = np.zeros((1 + 2 * n, n + k))
        a[1 : 1 + n, :n] = np.eye(n)
        a[1 + n :, :n] = np.eye(n)
        a[0, n:] = 1.0
        a[1 : 1 + n, n:] = -np.array(patterns, np.float64).T
        b = np.concatenate([[gpus], np.zeros(n), supply])
        objective = -np.concatenate([np.array(sizes, np.float64), np.zeros(k)])
        res = linprog(objective, A_ub=a, b_ub=b, bounds=(0, None), method="highs")
        if res.status != 0:
            return None
        duals = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)
        gpu_price, slot_prices = float(duals[0]), duals[1 : 1 + n]
        got, slots = best_pattern(slot_prices.tolist(), sizes, grain)
        if got <= gpu_price + ENTER or slots in patterns:
            break
        patterns.append(slots)
    fill, _ = fill_table(slot_prices.tolist(), sizes, grain)
    used = tuple({m: a for m, a in zip(sizes, p, strict=True) if a} for p in patterns)
    return SharePrices(dict(zip(sizes, slot_prices.tolist(), strict=True)), tuple(fill), grain, used)


def load_solver() -> None:
    """Import the LP solver now (scipy.optimize: about 0.3 s of CPU, once per process) rather than
    inside the first price solve, where it stalls one scheduling decision. A scheduler configured
    with packfrag calls this when its gpushare plugin is built (`PackFragPolicy.load_solver`)."""
    importlib.import_module("scipy.optimize")


class SharePricer:
    """packfrag's share prices as its workload changes: worked out once `PRICE_AFTER` pods have been
    learned (a given workload: at once), then again only when more than `PRICE_DRIFT` of the
    single-GPU shares' demand has moved (half the L1 distance of the proportions), each solve
    starting from the last one's patterns: the workload settles after a few thousand pods, and most
    relearns then cost no LP. `waste` gives weight x waste by a GPU's free milli, per share size."""

    def __init__(self, weight: float = PRICE_WEIGHT) -> None:
        self.weight = weight
        self.prices: SharePrices | None = None
        self._priced: dict[int, float] = {}  # the demand the prices were worked out for
        self._tables: dict[int, list[float]] = {}

    def update(self, workload: TargetWorkload, learned: int | None) -> None:
        """A new workload; `learned`: the pods it was learned from (None: given up front)."""
        if not self.weight or (learned is not None and learned < PRICE_AFTER):
            return
        demand: Counter[int] = Counter()
        for t, p in zip(workload.types, workload.probabilities.tolist(), strict=True):
            if t.count == 1 and 0 < t.milli < MILLI:
                demand[t.milli] += p
        total = sum(demand.values())
        share = {m: p / total for m, p in demand.items()} if total else {}
        moved = sum(abs(share.get(m, 0.0) - self._priced.get(m, 0.0)) for m in share.keys() | self._priced.keys())
        if self._priced and moved <= 2 * PRICE_DRIFT:
            return
        self._priced = share
        self.prices = share_prices(share, self.prices.patterns if self.prices else ()) if share else None
        self._tables = {}

    def waste(self, shape: PodShape) -> list[float] | None:
        """weight x waste(m, free) by a GPU's free milli for a single share of a priced size; None for
        every other pod (and without prices)."""
        if self.prices is None or shape.whole or shape.count != 1 or shape.milli not in self.prices.price:
            return None
        found = self._tables.get(shape.milli)
        if found is None:
            found = self._tables[shape.milli] = [self.weight * x for x in self.prices.waste_table(shape.milli)]
        return found
