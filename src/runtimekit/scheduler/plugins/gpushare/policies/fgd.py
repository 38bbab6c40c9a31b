"""FGD, fragmentation gradient descent (Weng et al., USENIX ATC'23; docs/fgd-method.md §6).

The fragmentation of a node for a target workload is F = sum_t p_t F(t), where F(t) is the node's
free GPU milli that pod type t could not use: everything when t cannot run there (CPU-only type,
GPU model not allowed, too little CPU, too few GPUs with enough free share), else the free milli
on the GPUs too small for t. A pod goes to the node, and the GPU, whose fragmentation grows least:
score = floor(100 * sigmoid((F_before - F_after) / 1000)), ties to the lowest node rank and the
lowest GPU index.

Speed: F depends on a node only through its GPU model, the sorted free milli of its usable GPUs,
and which typical CPU requests its free CPU meets, so F values are memoised on that key, scores
on (pod shape, key before, key after), and per (pod shape, node) until the node's version changes.
Node states (model, sorted free milli) are interned as integers, so rescoring thousands of nodes
groups them by (state, CPU bucket before, after) with numpy and works out each distinct group once.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, GpuKind, GpuRequest
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.base import (
    Learner,
    LearnsAt,
    PodShape,
    PolicyContext,
    TakesWorkload,
    best_fit_gpus,
)
from runtimekit.scheduler.plugins.gpushare.policies.nodestates import NodeStates, ShapeCache, best_gpu, placements
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload

FloatArray = npt.NDArray[np.float64]
StateKey = tuple[str, tuple[int, ...], int]  # (GPU model, sorted free milli, CPU bucket)
MEMO_LIMIT = 2_000_000
STATE_LIMIT = 1_000_000  # interned node states; past it the policy starts afresh
SMALL_RESCORE = 32
SMALL_COMPUTE = 8  # F values worked out one by one below this many; in one numpy batch above


class Fragmentation:
    """Memoised F(model, free milli multiset, CPU bucket) for one target workload."""

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        types = workload.types
        self.thresholds = np.array(sorted({t.cpu_milli for t in types}), np.int64)
        self._threshold_list = self.thresholds.tolist()
        demands = sorted({(t.milli, t.count) for t in types if not t.cpu_only})
        self.demand_milli = np.array([d[0] for d in demands], np.int64)
        self.demand_count = np.array([d[1] for d in demands], np.int64)
        self._demands = demands
        self._demand_of = [demands.index((t.milli, t.count)) if not t.cpu_only else -1 for t in types]
        self._cpu_index = np.searchsorted(self.thresholds, [t.cpu_milli for t in types])
        self._weights: dict[tuple[str, int], FloatArray] = {}
        self._weight_lists: dict[tuple[str, int], list[float]] = {}
        self.memo: dict[StateKey, float] = {}

    def bucket(self, cpu: int | IntArray) -> IntArray:
        """How many typical CPU requests a free CPU amount meets."""
        return np.searchsorted(self.thresholds, cpu, side="right")

    def bucket_of(self, cpu: int) -> int:
        """`bucket` of one amount, without numpy's per-call cost."""
        return bisect_right(self._threshold_list, cpu)

    def weights(self, model: str, bucket: int) -> FloatArray:
        """Per GPU demand, the probability mass of types that could run on such a node if GPUs allowed."""
        key = (model, bucket)
        found = self._weights.get(key)
        if found is None:
            found = np.zeros(self.demand_milli.size, np.float64)
            for t, (pod_type, p) in enumerate(zip(self.workload.types, self.workload.probabilities, strict=True)):
                demand = self._demand_of[t]
                allowed = pod_type.allowed()
                if demand >= 0 and self._cpu_index[t] < bucket and (allowed is None or model in allowed):
                    found[demand] += p
            self._weights[key] = found
        return found

    def values(self, keys: Iterable[StateKey]) -> list[float]:
        """F for each key, computing the unknown ones in one batch."""
        wanted = list(keys)
        memo = self.memo
        if len(memo) > MEMO_LIMIT:  # a long-running scheduler sees endless states: start afresh
            memo.clear()
        missing = list({k: None for k in wanted if k not in memo})
        if len(missing) > SMALL_COMPUTE:
            self._compute(missing)
        else:
            for key in missing:
                memo[key] = self._compute_one(key)
        return [memo[k] for k in wanted]

    def _compute_one(self, key: StateKey) -> float:
        """`_compute` for one key without building 3-D arrays: the GPUs that are big enough for a
        demand are a suffix of the sorted free milli, so a bisect and a prefix sum give its count and
        what lies below. The per-demand terms are summed by numpy as `_compute` sums them, so the
        value is the same to the last bit."""
        model, ms, bucket = key
        weights = self._weight_lists.get((model, bucket))
        if weights is None:
            weights = self._weight_lists[(model, bucket)] = self.weights(model, bucket).tolist()
        prefix = [0, *itertools.accumulate(ms)]
        total, count = prefix[-1], len(ms)
        terms = [0.0] * len(weights)
        for d, (milli, need) in enumerate(self._demands):
            at = bisect_left(ms, milli)
            if count - at >= need:
                terms[d] = weights[d] * float(total - prefix[at])
        return float(total) - float(np.add.reduce(np.array(terms, np.float64)))

    def _compute(self, keys: list[StateKey]) -> None:
        width = max(1, *(len(k[1]) for k in keys))
        free = np.full((len(keys), width), -1, np.int64)
        for i, (_, ms, _) in enumerate(keys):
            free[i, : len(ms)] = ms
        weights = np.stack([self.weights(model, bucket) for model, _, bucket in keys])
        valid = free >= 0
        total = np.where(valid, free, 0).sum(axis=1).astype(np.float64)
        if self.demand_milli.size:
            g = free[:, None, :]
            enough = g >= self.demand_milli[None, :, None]
            fits = enough.sum(axis=2) >= self.demand_count[None, :]
            below = np.where(valid[:, None, :] & ~enough, g, 0).sum(axis=2)
            usable = (weights * fits * (total[:, None] - below)).sum(axis=1)
        else:
            usable = np.zeros(len(keys))
        for key, value in zip(keys, total - usable, strict=True):
            self.memo[key] = float(value)


def _distance(a: TargetWorkload, b: TargetWorkload) -> float:
    """Total variation distance between two workloads' type distributions."""
    pa = dict(zip(a.types, a.probabilities.tolist(), strict=True))
    pb = dict(zip(b.types, b.probabilities.tolist(), strict=True))
    return float(0.5 * sum(abs(pa.get(t, 0.0) - pb.get(t, 0.0)) for t in pa.keys() | pb.keys()))


def _sigmoid_score(delta: float) -> int:
    return int(100.0 / (1.0 + math.exp(-delta / 1000.0)))


class FgdPolicy(Learner, TakesWorkload):
    """Learns its target workload from the pods it scores (as the paper's simulator, which scores
    only pods with a choice of nodes), unless given one. Until it has one, it scores every node 0
    and chooses GPUs by best fit."""

    name = "fgd"
    learns_at = LearnsAt.SCORE

    def __init__(self, workload: TargetWorkload | None = None, learn_every: int = 256, window: int = 4096) -> None:
        self._fixed = workload is not None
        self._recent: deque[PodType] = deque(maxlen=window)  # the pod types seen last, for online learning
        self._recent_counts: Counter[PodType] = Counter()  # of each type in `_recent`, kept as it moves
        self._seen_total = 0
        self._learn_every = learn_every
        self._frag: Fragmentation | None = Fragmentation(workload) if workload is not None else None
        self._nodes = NodeStates()
        self._shapes: dict[PodShape, ShapeCache] = {}
        # score of each free value a GPU may have, per (shape, node state id, CPU buckets): the GPU choice
        self._choices: dict[tuple[PodShape, int, int, int], dict[int, int]] = {}

    # -- the target workload ---------------------------------------------------------------
    @property
    def workload(self) -> TargetWorkload | None:
        return self._frag.workload if self._frag else None

    def set_workload(self, workload: TargetWorkload) -> None:
        self._frag = Fragmentation(workload)
        self._shapes.clear()
        self._choices.clear()

    def with_workload(self, workload: TargetWorkload) -> FgdPolicy:
        return FgdPolicy(workload)

    def learn(self, pod_type: PodType) -> None:
        """Learn the target workload from arriving pods when none was given: the types of the last
        `window` pods. It is rebuilt (and every cache dropped) only when it has drifted: checked every
        `learn_every` pods, rebuilt when the total variation distance to the current one exceeds 0.05."""
        if self._fixed:
            return
        recent, counts = self._recent, self._recent_counts
        if len(recent) == recent.maxlen:  # the oldest leaves the window
            oldest = recent[0]
            counts[oldest] -= 1
            if not counts[oldest]:
                del counts[oldest]
        recent.append(pod_type)
        counts[pod_type] += 1
        self._seen_total += 1
        if self._frag is not None and self._seen_total % self._learn_every:
            return
        candidate = TargetWorkload.from_counts(counts)
        if self._frag is None or _distance(self._frag.workload, candidate) > 0.05:
            self.set_workload(candidate)

    def _fragmentation(self) -> Fragmentation:
        if self._frag is None:
            raise RuntimeError("FGD has no target workload yet")
        return self._frag

    # -- node states -----------------------------------------------------------------------
    def _bound_states(self) -> None:
        """A long-running scheduler sees endless node states: past the limit, start afresh."""
        if len(self._nodes.states) > STATE_LIMIT:
            self._nodes = NodeStates()
            self._shapes.clear()
        self._choices.clear()

    def _value_scores(
        self, shape: PodShape, model: str, ms: tuple[int, ...], b0: int, b1: int
    ) -> list[tuple[int, int]]:
        """(score, free value of the GPU used) for each distinct placement on a node state."""
        afters = placements(shape, ms)
        values = self._fragmentation().values([(model, ms, b0), *((model, after, b1) for _, after in afters)])
        return [(_sigmoid_score(values[0] - f), v) for (v, _), f in zip(afters, values[1:], strict=True)]

    # -- the policy ------------------------------------------------------------------------
    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        if self._frag is None:  # nothing learned yet: no node is better than another
            return np.zeros(rows.size, np.int64)
        table = ctx.table
        self._bound_states()
        cache = self._shapes.get(shape)
        if cache is None:
            cache = self._shapes[shape] = ShapeCache(np.int64)
        stale = cache.stale(table, rows)
        if stale.size:  # only rows whose value is stale need their node state
            self._nodes.refresh(table, stale)
            cache.store(table, stale, self._rescore(shape, cache, table.cpu_free[stale], stale))
        scores: IntArray = cache.values(table, rows)
        return scores

    def _rescore(self, shape: PodShape, cache: ShapeCache, cpu: IntArray, rows: IntArray) -> IntArray:
        frag = self._fragmentation()
        nb = frag.thresholds.size + 1  # CPU buckets are 0..len(thresholds)
        if rows.size <= SMALL_RESCORE:  # the usual case between two pods: a row or two; numpy costs more
            bucket_of, need = frag.bucket_of, shape.cpu_milli
            listed = [
                (sid * nb + bucket_of(free)) * nb + bucket_of(free - need)
                for sid, free in zip(self._nodes.id[rows].tolist(), cpu.tolist(), strict=True)
            ]
            distinct_keys = list(dict.fromkeys(listed))
            position = {key: j for j, key in enumerate(distinct_keys)}
            inverse = np.array([position[key] for key in listed], np.int64)
        else:
            keys = (self._nodes.id[rows] * nb + frag.bucket(cpu)) * nb + frag.bucket(cpu - shape.cpu_milli)
            distinct, inverse = np.unique(keys, return_inverse=True)
            distinct_keys = distinct.tolist()
        scores = np.empty(len(distinct_keys), np.int64)
        missing: list[tuple[int, int]] = []
        by_state = cache.by_key
        for j, key in enumerate(distinct_keys):
            found = by_state.get(key)
            if found is None:
                missing.append((j, key))
            else:
                scores[j] = found
        if missing:
            if len(by_state) > MEMO_LIMIT // 4:
                by_state.clear()
            # Work out every F value the missing groups need in one batch, then score them.
            plans = []
            wanted: list[StateKey] = []
            for j, key in missing:
                sid, buckets = divmod(key, nb * nb)
                b0, b1 = divmod(buckets, nb)
                model, ms = self._nodes.states[sid]
                afters = [(model, a, b1) for _, a in placements(shape, ms)]
                plans.append((j, key, (model, ms, b0), afters))
                wanted.append((model, ms, b0))
                wanted.extend(afters)
            frag.values(wanted)
            memo = frag.memo
            for j, key, before, afters in plans:
                f0 = memo[before]
                found = by_state[key] = max(_sigmoid_score(f0 - memo[a]) for a in afters)
                scores[j] = found
        return scores[inverse]

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        if self._frag is None:  # nothing learned yet (the pod was placed without scoring)
            return best_fit_gpus(ctx, req, row, fitting)
        if req.kind is GpuKind.WHOLE or req.core_milli >= MILLI or req.count > 1 or not fitting.size:
            return [int(c) for c in fitting[: req.count]]
        self._bound_states()
        self._nodes.refresh(ctx.table, np.array([row]))
        sid = int(self._nodes.id[row])
        frag = self._fragmentation()
        cpu = int(ctx.table.cpu_free[row])
        b0, b1 = frag.bucket_of(cpu), frag.bucket_of(cpu - shape.cpu_milli)
        key = (shape, sid, b0, b1)
        by_value = self._choices.get(key)
        if by_value is None:  # nodes in the same state choose alike: remember it
            if len(self._choices) > MEMO_LIMIT // 8:
                self._choices.clear()
            model, ms = self._nodes.states[sid]
            by_value = self._choices[key] = {v: s for s, v in self._value_scores(shape, model, ms, b0, b1)}
        return best_gpu(by_value, ctx.table, row, fitting)
