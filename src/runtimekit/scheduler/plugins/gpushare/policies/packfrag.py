"""packfrag: place each pod where it costs the typical pods the least usable GPU capacity.

A node's usable capacity for a pod type t (CPU r, per-GPU share m, count k, allowed models) is the
GPU milli that pods of type t alone could still take there:
  * a share type covers the free milli of the GPUs with at least m free, but only as many GPUs as
    the node's free CPU has room for pods of t (floor(cpu / r)), the largest first;
  * a whole-GPU type takes k fully free GPUs per pod, as many pods as both the fully free GPUs
    (floor(free / k)) and the free CPU allow;
  * nothing where t may not run (model not allowed, CPU-only type).
The loss of a placement is sum_t p_t (U_t(before) - U_t(after)) over the target workload p, and
the node (and GPU) with the least loss wins. FGD (fgd.py) measures the same thing with two
differences: it counts a node as usable for t whenever one pod of t fits, however little CPU is
left for more, and it adds the pod's own request to the score, which flattens the scores of large
pods. Losses are scored as FGD scores its fragmentation change, floor(100 sigmoid(-loss / 1000)),
so near-equal nodes tie and go to the session's node rank (first fit), which packs.

The target workload is learned online from the pods the scheduler sees (`learn`, called once per
pod by the gpushare plugin): every pod type seen in the last `window` pods, by count. No knowledge
of future arrivals is used. Callers: the gpushare plugin (live scheduler and trace replay).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, GpuKind, GpuRequest, NodeTable
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.base import PodShape, PolicyContext, best_fit_gpus
from runtimekit.scheduler.plugins.gpushare.policies.nodestates import NodeState, NodeStates, ShapeCache, placements
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload

FloatArray = npt.NDArray[np.float64]
MEMO_LIMIT = 1_000_000  # entries a memo keeps before it starts afresh (a live scheduler sees endless states)
MAX_GPUS = 64  # GPUs per node that CPU buckets can tell apart
CPU_SPAN = 1 << 40  # more CPU milli than any node has
BUCKET_BITS = 32  # a CPU bucket fits in this many bits (see UsableCapacity.bucket)


@runtime_checkable
class Learner(Protocol):
    """A policy that learns its target workload from the pods it is asked about: the gpushare plugin
    calls `learn` once per pod, before the pod is scored, whether or not it fits anywhere."""

    def learn(self, pod_type: PodType) -> None: ...


class UsableCapacity:
    """sum_t p_t U_t(state) for one target workload, memoised by (node state, CPU bucket)."""

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        types = workload.types
        self.p = np.asarray(workload.probabilities, np.float64)
        self.cpu = np.array([max(t.cpu_milli, 1) for t in types], np.int64)
        self.gpu = np.array([not t.cpu_only for t in types], np.bool_)
        self.milli = np.where(self.gpu, [t.milli for t in types], 0).astype(np.int64)
        self.count = np.where(self.gpu, [t.count for t in types], 0).astype(np.int64)
        self.whole = self.milli >= MILLI
        self._allowed = [t.allowed() for t in types]
        self._runs_on: dict[str, npt.NDArray[np.bool_]] = {}
        self._multiples = np.zeros(0, np.int64)
        self._starts = np.zeros(0, np.int64)
        self.memo: dict[int, float] = {}

    def bucket(self, cpu: IntArray, gpus: IntArray) -> IntArray:
        """U depends on the free CPU c only through which multiples j * r_t (j = 1..`gpus`, the GPUs
        that still have free milli) c reaches: the bucket counts them, and encodes `gpus` so that the
        buckets of nodes with different GPU counts never clash."""
        gpus = np.minimum(gpus, MAX_GPUS)
        width = int(gpus.max(initial=0))
        if self._starts.size <= width + 1:
            self._grow(width)
        # The multiples of every width sit in one sorted array, width w's shifted by w * CPU_SPAN.
        shifted = gpus * CPU_SPAN + np.maximum(cpu, -1)
        reached = np.searchsorted(self._multiples, shifted, side="right") - self._starts[gpus]
        return reached * (MAX_GPUS + 1) + gpus

    def _grow(self, width: int) -> None:
        cpus = self.cpu[self.gpu]
        widths = range(min(2 * width, MAX_GPUS) + 1)
        rows = [w * CPU_SPAN + np.unique(cpus[:, None] * np.arange(1, w + 1)[None, :]) for w in widths]
        self._multiples = np.concatenate(rows)
        self._starts = np.cumsum([0, *(r.size for r in rows)]).astype(np.int64)

    def runs_on(self, model: str) -> npt.NDArray[np.bool_]:
        """Per type: may it use this GPU model."""
        found = self._runs_on.get(model)
        if found is None:
            allowed = [a is None or model in a for a in self._allowed]
            found = self._runs_on[model] = self.gpu & np.array(allowed, np.bool_)
        return found

    def values(self, keys: list[int], states: list[NodeState], cpu: list[int]) -> list[float]:
        """sum_t p_t U_t per entry. `keys` identify (state, CPU bucket); `cpu` is a free CPU amount
        in each entry's bucket. Unknown keys are computed in one batch."""
        memo = self.memo
        if len(memo) > MEMO_LIMIT:
            memo.clear()
        missing = {k: i for i, k in enumerate(keys) if k not in memo}
        if missing:
            at = list(missing.values())
            computed = self._compute([states[i] for i in at], [cpu[i] for i in at])
            memo.update(zip(missing, computed.tolist(), strict=True))
        return [memo[k] for k in keys]

    def _compute(self, states: list[NodeState], cpu_free: list[int]) -> FloatArray:
        width = max(1, *(len(s[1]) for s in states))
        free = np.full((len(states), width), -1, np.int64)
        for i, (_, ms) in enumerate(states):
            free[i, : len(ms)] = ms[::-1]  # largest first, so the GPUs that fit a share form a prefix
        cpu_pods = np.maximum(np.array(cpu_free, np.int64), 0)[:, None] // self.cpu[None, :]
        largest = np.concatenate([np.zeros((len(states), 1), np.int64), np.cumsum(np.maximum(free, 0), axis=1)], axis=1)
        fitting = (free[:, :, None] >= self.milli[None, None, :]).sum(axis=1)
        share = np.take_along_axis(largest, np.minimum(cpu_pods, fitting), axis=1)
        per_pod = np.maximum(self.count, 1)[None, :]
        whole = np.minimum((free == MILLI).sum(axis=1)[:, None] // per_pod, cpu_pods) * per_pod * MILLI
        usable = np.where(self.whole[None, :], whole, share)
        runs = np.stack([self.runs_on(s[0]) for s in states])
        return np.asarray(np.where(runs, usable, 0) @ self.p, np.float64)


class OnlineWorkload:
    """The pod types of the last `window` pods. Rebuilt after 1, 2, 4, ... pods (a quick cold
    start), then every `relearn_every` pods (rebuilding drops the policy's caches)."""

    def __init__(self, window: int, relearn_every: int, coverage: float) -> None:
        self.recent: deque[PodType] = deque(maxlen=window)
        self.counts: Counter[PodType] = Counter()
        self.seen = 0
        self.relearn_every = relearn_every
        self.coverage = coverage
        self._next = 1

    def add(self, pod_type: PodType) -> TargetWorkload | None:
        """Count a pod; a new workload when it is time to rebuild, else None."""
        if len(self.recent) == self.recent.maxlen:
            old = self.recent[0]
            self.counts[old] -= 1
            if not self.counts[old]:
                del self.counts[old]
        self.recent.append(pod_type)
        self.counts[pod_type] += 1
        self.seen += 1
        if self.seen < self._next:
            return None
        self._next = min(2 * self.seen, self.seen + self.relearn_every)
        return TargetWorkload.from_types(self.counts.elements(), self.coverage)


class PackFragPolicy:
    name = "packfrag"

    def __init__(
        self,
        workload: TargetWorkload | None = None,
        window: int = 8192,
        relearn_every: int = 1024,
        coverage: float = 1.0,
    ) -> None:
        self._learner = None if workload is not None else OnlineWorkload(window, relearn_every, coverage)
        self._usable: UsableCapacity | None = self._make(workload) if workload is not None else None
        self._nodes = NodeStates()
        self._shapes: dict[PodShape, ShapeCache] = {}

    def _make(self, workload: TargetWorkload) -> UsableCapacity:
        return UsableCapacity(workload)

    @property
    def pods_seen(self) -> int:
        """Pods learned so far (0 when the workload was given)."""
        return self._learner.seen if self._learner is not None else 0

    @property
    def workload(self) -> TargetWorkload | None:
        return self._usable.workload if self._usable is not None else None

    def learn(self, pod_type: PodType) -> None:
        """Count an arriving pod (once per pod) towards the learned target workload."""
        if self._learner is None:
            return
        workload = self._learner.add(pod_type)
        if workload is not None:
            self._usable = self._make(workload)
            self._shapes.clear()
        if len(self._nodes.states) > MEMO_LIMIT:
            self._nodes = NodeStates()
            self._shapes.clear()

    def _capacity(self, shape: PodShape) -> UsableCapacity:
        if self._usable is None:  # asked before any pod was seen: this pod is the whole workload
            self.learn(PodType(shape.cpu_milli, shape.milli if shape.gpu else 0, shape.count))
        assert self._usable is not None
        return self._usable

    # -- the policy ------------------------------------------------------------------------
    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        table = ctx.table
        capacity = self._capacity(shape)
        self._nodes.refresh(table, rows)
        cache = self._shapes.get(shape)
        if cache is None:
            cache = self._shapes[shape] = ShapeCache()
        stale = cache.stale(table, rows)
        if stale.size:
            cache.store(table, stale, self._losses(capacity, shape, cache, table, stale))
        return self._scores(cache.values(table, rows))

    @staticmethod
    def _scores(loss: FloatArray) -> IntArray:
        """FGD's integer score of a fragmentation change, for losses: 50 for none, one point less per
        about 40 milli of loss near zero."""
        scores: IntArray = np.floor(100.0 / (1.0 + np.exp(loss / 1000.0))).astype(np.int64)
        return scores

    def _losses(
        self, capacity: UsableCapacity, shape: PodShape, cache: ShapeCache, table: NodeTable, rows: IntArray
    ) -> list[float]:
        cpu = table.cpu_free[rows]
        gpus = (table.usable[rows] & (table.core_free[rows] > 0)).sum(axis=1)
        before = (self._nodes.id[rows] << BUCKET_BITS) | capacity.bucket(cpu, gpus)
        after = capacity.bucket(cpu - shape.cpu_milli, gpus)
        keys = [(b << BUCKET_BITS) | a for b, a in zip(before.tolist(), after.tolist(), strict=True)]
        by_key = cache.by_key
        missing = {k: i for i, k in enumerate(keys) if k not in by_key}
        if missing:
            if len(by_key) > MEMO_LIMIT:
                by_key.clear()
            at = list(missing.values())
            scores = self._score_states(capacity, shape, before[at], after[at], cpu[at], rows[at])
            by_key.update(zip(missing, scores, strict=True))
        return [by_key[k] for k in keys]

    def _score_states(
        self,
        capacity: UsableCapacity,
        shape: PodShape,
        before: IntArray,
        after: IntArray,
        cpu: IntArray,
        rows: IntArray,
    ) -> list[float]:
        """The loss of each (row state, CPU buckets): the least loss over the pod's placements, all
        usable capacities computed in one batch."""
        nodes = self._nodes
        keys: list[int] = []
        states: list[NodeState] = []
        cpus: list[int] = []
        spans = []
        for key, bucket, c, row in zip(before.tolist(), after.tolist(), cpu.tolist(), rows.tolist(), strict=True):
            state = nodes.states[int(nodes.id[row])]
            options = placements(shape, state[1])
            spans.append((len(keys), len(options)))
            keys.append(key)
            states.append(state)
            cpus.append(c)
            for _, free_after in options:
                after_state = (state[0], free_after)
                keys.append((nodes.intern(after_state) << BUCKET_BITS) | bucket)
                states.append(after_state)
                cpus.append(c - shape.cpu_milli)
        values = capacity.values(keys, states, cpus)
        return [values[start] - max(values[start + 1 : start + 1 + n]) for start, n in spans]

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        """Whole GPUs: the lowest-index fitting GPUs. A multi-GPU share: the least free fitting ones.
        A single share: the GPU with the best score, the lowest index on ties. Each is the placement
        the node's score assumed."""
        if req.kind is GpuKind.WHOLE or req.core_milli >= MILLI or req.count > 1 or not fitting.size:
            return best_fit_gpus(ctx, req, row, fitting)
        capacity = self._capacity(shape)
        table = ctx.table
        rows = np.array([row])
        self._nodes.refresh(table, rows)
        model, ms = self._nodes.states[int(self._nodes.id[row])]
        cpu = table.cpu_free[rows]
        gpus = (table.usable[rows] & (table.core_free[rows] > 0)).sum(axis=1)
        before = capacity.bucket(cpu, gpus)
        after = capacity.bucket(cpu - shape.cpu_milli, gpus)
        options = placements(shape, ms)
        keys = [(int(self._nodes.id[row]) << BUCKET_BITS) | int(before[0])]
        keys += [(self._nodes.intern((model, free)) << BUCKET_BITS) | int(after[0]) for _, free in options]
        c = int(cpu[0])
        values = capacity.values(
            keys, [(model, ms), *((model, f) for _, f in options)], [c] + [c - shape.cpu_milli] * len(options)
        )
        losses = [values[0] - u for u in values[1:]]
        scores = self._scores(np.array(losses)).tolist()
        by_value = {v: sc for (v, _), sc in zip(options, scores, strict=True)}
        free = table.core_free[row]
        best = max(by_value.get(int(free[c]), -1) for c in fitting)
        return [next(int(c) for c in fitting if by_value.get(int(free[c]), -1) == best)]
