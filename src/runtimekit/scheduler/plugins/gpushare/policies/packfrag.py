"""packfrag: place each pod where it costs the typical pods the least usable GPU capacity.

A node's usable capacity for a pod type t (CPU r, per-GPU share m, count k, allowed models) is the
GPU milli that pods of type t alone could still take there:
  * a share type covers the free milli of the GPUs with at least m free, but only as many GPUs as
    the node's free CPU has room for pods of t (floor(cpu / r)), the largest first;
  * a whole-GPU type takes k fully free GPUs per pod, as many pods as both the fully free GPUs
    (floor(free / k)) and the free CPU allow;
  * nothing where t may not run (model not allowed, CPU-only type).
The loss of a placement is sum_t w_t p_t (U_t(before) - U_t(after)) over the target workload p,
and the node (and GPU) with the least loss wins. A share type counts in full (w_t = 1); a type of k
whole GPUs counts `whole_weight` / k (0.25 / k by default): the fully free GPUs such pods need are
already counted, in full, by every share type that could use them, and counting them again at full
weight per whole type made the policy hoard idle GPUs and intact nodes for whole-GPU pods (which
find idle GPUs anyway until late) at the share pods' expense. A whole-GPU type that few nodes can
ever host keeps more: its weight is multiplied by (nodes with k GPUs) / (those that also have its
CPU), up to 1, worked out from the node table whenever the workload changes; and the hosts of such
rare types are kept for them: a placement that would spoil one loses `HOST_PENALTY` points
(rarehosts.py). A single share also pays for the gap it leaves: `price_weight` times its waste at
the learned workload's share prices (prices.py: V(g) - V(g - m) - y_m from the shares-only pattern
LP), so that shares go where the workload can fill the rest of the GPU, as the offline optimum's
patterns do (a 470 beside a 320 leaves 210 that only rare pods fill; beside another 470, 60).
docs/results/better-than-fgd.md has the measurements behind the weights.

A pod that asks for no GPU goes, among the nodes where it costs no usable capacity, to a node with no
GPU that GPU pods could use (a CPU node, a node with every GPU in MIG mode) first: `NO_GPU_BONUS`
points. The usable capacity counts a node's free CPU only through the GPU pods it could still host,
and its memory not at all, so such nodes all tie at no loss and first fit put CPU pods on GPU nodes,
where their memory and CPU can leave GPUs idle (on `h200-mig` gpushare100, 8-GPU nodes left with
8 idle GPUs and 14 GiB of memory; docs/results/cluster-shapes.md). A node list with GPUs everywhere
(openb's GPU nodes) places exactly as without it.

Once the learned pods ask more CPU per GPU milli than the cluster's GPU nodes have (CPU, not GPUs,
runs out first: openb's cpu250), a pod that asks no GPU may not take a GPU node's free CPU below
`cpu_reserve` times the learned GPU pods' CPU per GPU milli times the node's free GPU milli, nor
spoil a kept host of a rare type (`cpu_kept`, which the gpushare plugin applies as a filter): where
only such nodes are left it waits (Pending, "CPU kept for the node's free GPUs") instead of
stranding GPUs behind exhausted CPU; GPU pods are never held back. With CPU to spare nothing is
kept. On a node in MIG mode, the spare-node bonus above turns into a point less when the pod would
leave less CPU than the node's free slices need at the same rate (a soft cap, always on: the slices
are not in the usable capacity).

FGD (fgd.py) measures the same thing with two differences: it counts a node as usable for t
whenever one pod of t fits, however little CPU is left for more, and it adds the pod's own request
to the score, which flattens the scores of large pods. Losses are scored as FGD scores its
fragmentation change, floor(100 sigmoid(-loss / 1000)), so near-equal nodes tie and go to the
session's node rank (first fit), which packs.

The target workload is learned online from the pods the scheduler sees (`learn`, called once per
pod by the gpushare plugin): every pod type seen in the last `window` pods, by count. No knowledge
of future arrivals is used. Callers: the gpushare plugin (live scheduler and trace replay).
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from collections.abc import Hashable

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, GpuKind, GpuRequest, NodeTable
from runtimekit.model.ledger import IntArray
from runtimekit.model.migstate import MigGpuState
from runtimekit.scheduler.plugins.gpushare.policies.base import (
    Learner,
    LearnsAt,
    PodShape,
    PolicyContext,
    RowLocalPolicy,
    best_fit_gpus,
)
from runtimekit.scheduler.plugins.gpushare.policies.nodestates import (
    NodeState,
    NodeStates,
    ShapeCache,
    best_gpu,
    placements,
)
from runtimekit.scheduler.plugins.gpushare.policies.prices import PRICE_WEIGHT, SharePricer, load_solver
from runtimekit.scheduler.plugins.gpushare.policies.rarehosts import HOST_PENALTY, RareHosts, rare_types
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload

FloatArray = npt.NDArray[np.float64]
MEMO_LIMIT = 1_000_000  # entries a memo keeps before it starts afresh (a live scheduler sees endless states)
MAX_GPUS = 64  # GPUs per node that CPU buckets can tell apart
CPU_SPAN = 1 << 40  # more CPU milli than any node has
BUCKET_BITS = 32  # a CPU bucket fits in this many bits (see UsableCapacity.bucket)
BUCKET_MASK = (1 << BUCKET_BITS) - 1
SMALL_RESCORE = 8  # stale rows up to which scores are keyed in plain ints, not numpy
SMALL_COMPUTE = 16  # usable capacities up to which the per-type terms are worked out in plain ints
SCORE_EDGE = 1e-9  # a score this close to an integer is floored as numpy does (see `_score_list`)
WHOLE_WEIGHT = 0.25  # a whole-GPU type's weight per GPU, relative to a share type's (see above)
NO_GPU_BONUS = 1  # score points a GPU-less pod gains on a node with no usable GPU (see above)
KEEP_AFTER = 256  # pods learned before GPU nodes keep CPU for their GPUs (see `cpu_kept`)
WORKLOAD_DRIFT = 0.02  # share of the learned proportions that must move before a relearn is used
CPU_RESERVE = 1.0  # CPU kept per free GPU milli, in the learned GPU pods' CPU per GPU milli (see above)


class UsableCapacity:
    """sum_t w_t p_t U_t(state) for one target workload, memoised by (node state, CPU bucket)."""

    def __init__(
        self, workload: TargetWorkload, whole_weight: float = WHOLE_WEIGHT, table: NodeTable | None = None
    ) -> None:
        self.workload = workload
        types = workload.types
        self.cpu = np.array([max(t.cpu_milli, 1) for t in types], np.int64)
        self.gpu = np.array([not t.cpu_only for t in types], np.bool_)
        self.milli = np.where(self.gpu, [t.milli for t in types], 0).astype(np.int64)
        self.count = np.where(self.gpu, [t.count for t in types], 0).astype(np.int64)
        self.whole = self.milli >= MILLI
        self._shares, self._share_of = np.unique(self.milli, return_inverse=True)
        self._share_list: list[int] = self._shares.tolist()
        self._facts: dict[tuple[int, ...], tuple[list[int], list[int], int]] = {}  # see `_gpu_facts`
        self._per_pod = np.maximum(self.count, 1)[None, :]
        weight = np.where(self.whole, whole_weight / np.maximum(self.count, 1), 1.0)
        self.rare: list[tuple[int, int]] = []  # see rarehosts.rare_types
        self.rare_share: dict[int, float] = {}
        if table is not None:
            rarity = _host_rarity(self, table)
            weight = np.where(self.whole, np.minimum(1.0, weight * rarity), weight)
            allowed_any = np.array([a is None for a in (t.allowed() for t in types)], np.bool_)
            self.rare, self.rare_share = rare_types(
                self.whole & allowed_any, self.count, self.cpu, rarity, workload.probabilities, table
            )
        # CPU milli the learned pods ask per GPU milli: the GPU pods', and every pod's (see `cpu_kept`)
        probabilities = np.asarray(workload.probabilities, np.float64)
        gpu_milli = float(probabilities @ (self.milli * self.count))
        cpu_asked = probabilities * np.array([t.cpu_milli for t in types], np.float64)
        self.gpu_pod_cpu_rate = float(cpu_asked[self.gpu].sum()) / gpu_milli if gpu_milli else 0.0
        self.cpu_rate = float(cpu_asked.sum()) / gpu_milli if gpu_milli else 0.0
        # GPU milli an average pod asks: how many more pods the free GPUs hold (see `_spoiled`)
        self.pod_milli = float(np.asarray(workload.probabilities) @ (self.milli * self.count)) or float(MILLI)
        self.p = np.asarray(workload.probabilities, np.float64) * weight  # w_t p_t
        self._allowed = [t.allowed() for t in types]
        self._runs_on: dict[str, npt.NDArray[np.bool_]] = {}
        self._model_rows: dict[str, int] = {}
        self._runs = np.zeros((0, len(types)), np.bool_)
        self._multiples = np.zeros(0, np.int64)
        self._starts = np.zeros(0, np.int64)
        # per GPU model, per type: (CPU, how it may use the model, GPUs per pod, share index); see `_usable_row`
        self._terms: dict[str, list[tuple[int, int, int, int]]] = {}
        self._multiple_list: list[int] = []  # the same two, as plain ints for `bucket_of`
        self._start_list: list[int] = []
        self.memo: dict[int, float] = {}

    def keep_from(self, earlier: UsableCapacity) -> None:
        """Take over what an earlier workload's capacity worked out that does not depend on the
        workload's proportions: the GPU facts per free milli (when the share sizes are the same) and
        the CPU multiples (when the GPU types' CPU are): a relearn then redoes neither."""
        if earlier._share_list == self._share_list:
            self._facts = earlier._facts
        if np.array_equal(np.unique(earlier.cpu[earlier.gpu]), np.unique(self.cpu[self.gpu])):
            self._multiples, self._starts = earlier._multiples, earlier._starts
            self._multiple_list, self._start_list = earlier._multiple_list, earlier._start_list

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

    def bucket_of(self, cpu: int, gpus: int) -> int:
        """`bucket` for one node, in plain ints (a row or two between pods: numpy costs more)."""
        gpus = gpus if gpus < MAX_GPUS else MAX_GPUS  # comparisons, not min() and max(): a few times a decision
        if len(self._start_list) <= gpus + 1:
            self._grow(gpus)
        shifted = gpus * CPU_SPAN + (cpu if cpu > -1 else -1)
        return (bisect_right(self._multiple_list, shifted) - self._start_list[gpus]) * (MAX_GPUS + 1) + gpus

    def _grow(self, width: int) -> None:
        cpus = self.cpu[self.gpu]
        widths = range(min(2 * width, MAX_GPUS) + 1)
        rows = [w * CPU_SPAN + np.unique(cpus[:, None] * np.arange(1, w + 1)[None, :]) for w in widths]
        self._multiples = np.concatenate(rows)
        self._starts = np.cumsum([0, *(r.size for r in rows)]).astype(np.int64)
        self._multiple_list = self._multiples.tolist()
        self._start_list = self._starts.tolist()

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

    def _gpu_facts(self, ms: tuple[int, ...]) -> tuple[list[int], list[int], int]:
        """What U reads of a node's free milli (ascending), whatever its CPU: the free milli of its
        k largest GPUs for k = 0..len, how many GPUs fit each distinct share, how many are whole."""
        found = self._facts.get(ms)
        if found is None:
            if len(self._facts) > MEMO_LIMIT:
                self._facts.clear()
            if not ms or ms[0] >= 0:  # the usual case (ascending: the first is the least)
                largest = list(itertools.accumulate(reversed(ms), initial=0))
            else:
                largest = [0, *itertools.accumulate(max(v, 0) for v in reversed(ms))]
            fitting = [len(ms) - bisect_left(ms, m) for m in self._share_list]
            found = self._facts[ms] = (largest, fitting, ms.count(MILLI))
        return found

    def _compute(self, states: list[NodeState], cpu_free: list[int]) -> FloatArray:
        """sum_t w_t p_t U_t per entry, in one matrix product over the entries' U_t (integers)."""
        if len(states) <= SMALL_COMPUTE:  # a few entries between two pods: numpy's per-call cost dominates
            rows = [self._usable_row(model, ms, c) for (model, ms), c in zip(states, cpu_free, strict=True)]
            # as float64 at once (exact: far below 2^53): numpy casts int64 to float64 for the product anyway
            small: FloatArray = np.array(rows, np.float64) @ self.p
            return small
        # The same product whichever way U was built: the values are identical to the last bit. (Not
        # whatever the batch, though: BLAS sums a row in an order that can depend on the rows beside it.)
        return np.asarray(self._usable_rows(states, cpu_free).astype(np.int64, copy=False) @ self.p, np.float64)

    def _usable_rows(self, states: list[NodeState], cpu_free: list[int]) -> IntArray:
        """U_t per entry and type, in numpy (many entries: a new shape, or every node after a relearn)."""
        n = len(states)
        facts = [self._gpu_facts(ms) for _, ms in states]
        sizes = {len(ms) for _, ms in states}
        width = max(1, *sizes)
        if len(sizes) == 1 and width == len(states[0][1]):  # the usual case: nodes alike, no padding
            largest = np.array([f[0] for f in facts], np.int64)
        else:  # k largest for k past a node's GPU count: all of it (the same as padding with empty GPUs)
            largest = np.array([(*f[0], *(f[0][-1],) * (width + 1 - len(f[0]))) for f in facts], np.int64)
        # GPUs with at least m free, once per distinct share m (types share few values of m)
        fitting = np.array([f[1] for f in facts], np.int64)[:, self._share_of]
        cpu_pods = np.maximum(np.array(cpu_free, np.int64), 0)[:, None] // self.cpu[None, :]
        share = largest[np.arange(n)[:, None], np.minimum(cpu_pods, fitting)]
        wholes = np.array([f[2] for f in facts], np.int64)
        whole = np.minimum(wholes[:, None] // self._per_pod, cpu_pods) * self._per_pod * MILLI
        usable = np.where(self.whole[None, :], whole, share)
        at = [self._model_row(model) for model, _ in states]  # first: it may grow `_runs`
        runs = self._runs[at]
        found: IntArray = np.where(runs, usable, 0)
        return found

    def _usable_row(self, model: str, ms: tuple[int, ...], cpu_free: int) -> list[int]:
        """`_usable_rows` for one entry in plain ints: the same integers, term by term."""
        terms = self._terms.get(model)
        if terms is None:
            runs = self.runs_on(model).tolist()
            # per type, in order: (CPU, kind: 0 may not run here, 1 share, 2 whole, GPUs per pod, share index)
            terms = self._terms[model] = [
                (int(self.cpu[i]), (2 if self.whole[i] else 1) if runs[i] else 0, int(self._per_pod[0, i]), int(s))
                for i, s in enumerate(self._share_of.tolist())
            ]
        largest, fitting, wholes = self._gpu_facts(ms)
        cpu = cpu_free if cpu_free > 0 else 0
        # min(pods, fitting) spelt out: a call of `min` per term costs more than the rest of the term
        return [
            largest[pods if (pods := cpu // need) < (fit := fitting[share]) else fit]
            if kind == 1
            else (min(wholes // per_pod, cpu // need) * per_pod * MILLI if kind else 0)
            for need, kind, per_pod, share in terms
        ]

    def _model_row(self, model: str) -> int:
        """The row of `_runs` (per type: may it use the model) for a GPU model, added when new."""
        row = self._model_rows.get(model)
        if row is None:
            row = self._model_rows[model] = len(self._model_rows)
            self._runs = np.vstack([self._runs, self.runs_on(model)[None, :]])
        return row


class OnlineWorkload:
    """The pod types of the last `window` pods. Learned again after 1, 2, 4, ... pods up to
    `relearn_every` (a quick cold start, every one used: the share prices and the CPU kept wait for
    a few hundred pods), then every `relearn_every` pods, where a learned workload replaces the one
    in use only when it has moved more than `drift` from it (half the L1 distance of the
    proportions) or brings a type of whole GPUs the one in use lacks. Replacing drops the policy's
    caches, and once the window holds a few thousand pods most relearns move it by sampling noise
    alone (under 0.01 per 1,024 pods on openb)."""

    def __init__(self, window: int, relearn_every: int, coverage: float, drift: float = WORKLOAD_DRIFT) -> None:
        self.recent: deque[PodType] = deque(maxlen=window)
        self.counts: Counter[PodType] = Counter()
        self.seen = 0
        self.relearn_every = relearn_every
        self.coverage = coverage
        self.drift = drift
        self.current: TargetWorkload | None = None
        self._next = 1

    def add(self, pod_type: PodType) -> TargetWorkload | None:
        """Count a pod; a new workload when it is time to rebuild and it moved, else None."""
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
        settled = self.seen > self.relearn_every  # past the cold start
        self._next = min(2 * self.seen, self.seen + self.relearn_every)
        learned = TargetWorkload.from_counts(self.counts, self.coverage)
        if settled and self.current is not None and not _moved(self.current, learned, self.drift):
            return None
        self.current = learned
        return learned


def _moved(current: TargetWorkload, learned: TargetWorkload, drift: float) -> bool:
    """Whether `learned` differs from `current` by more than `drift` (half the L1 distance of the
    proportions) or has a type of whole GPUs `current` lacks (a rare host type must be kept from
    the first pods of it on: rarehosts.py)."""
    before: dict[PodType, float] = dict(zip(current.types, current.probabilities.tolist(), strict=True))
    after: dict[PodType, float] = dict(zip(learned.types, learned.probabilities.tolist(), strict=True))
    if any(t.milli >= MILLI and t not in before for t in after):
        return True
    return sum(abs(after.get(t, 0.0) - before.get(t, 0.0)) for t in before.keys() | after.keys()) > 2 * drift


class PackFragPolicy(Learner, RowLocalPolicy):
    """Learns its target workload from every pod it is asked about, feasible or not, unless given one."""

    name = "packfrag"
    learns_at = LearnsAt.FILTER

    def __init__(
        self,
        workload: TargetWorkload | None = None,
        window: int = 8192,
        relearn_every: int = 1024,
        coverage: float = 1.0,
        whole_weight: float = WHOLE_WEIGHT,
        price_weight: float = PRICE_WEIGHT,
        cpu_reserve: float = CPU_RESERVE,
    ) -> None:
        if whole_weight < 0:
            raise ValueError(f"packfrag: whole_weight must not be negative, got {whole_weight}")
        if price_weight < 0:
            raise ValueError(f"packfrag: price_weight must not be negative, got {price_weight}")
        if cpu_reserve < 0:
            raise ValueError(f"packfrag: cpu_reserve must not be negative, got {cpu_reserve}")
        self.whole_weight = whole_weight
        self.cpu_reserve = cpu_reserve
        self._kept_rate = 0.0  # CPU milli a GPU node keeps per free GPU milli from GPU-less pods; 0: none
        self._pricer = SharePricer(price_weight)
        self._learner = None if workload is not None else OnlineWorkload(window, relearn_every, coverage)
        self._usable: UsableCapacity | None = None
        self._pending = workload  # a workload whose weights await the node table (see `_capacity`)
        self._nodes = NodeStates()
        self._shapes: dict[PodShape, ShapeCache] = {}  # integer scores per row, per pod shape
        # score of each free value a GPU may have, per (shape, node state id, CPU buckets): the GPU choice
        self._choices: dict[tuple[PodShape, int, int, int], dict[int, int]] = {}
        # per (shape, node state id): each distinct placement's GPU free value and the state it leaves
        self._afters: dict[tuple[PodShape, int], list[tuple[int, int]]] = {}
        self._rare = RareHosts()  # the hosts of rare whole-GPU types, kept (rarehosts.py)

    def load_solver(self) -> None:
        """Import the share prices' LP solver ahead of the first decision that needs it (prices.py)."""
        if self._pricer.weight:
            load_solver()

    def _drop_caches(self) -> None:
        self._shapes.clear()
        self._choices.clear()
        self._rare.forget()

    @property
    def pods_seen(self) -> int:
        """Pods learned so far (0 when the workload was given)."""
        return self._learner.seen if self._learner is not None else 0

    @property
    def workload(self) -> TargetWorkload | None:
        if self._pending is not None:
            return self._pending
        return self._usable.workload if self._usable is not None else None

    def learn(self, pod_type: PodType) -> None:
        """Count an arriving pod (once per pod) towards the learned target workload."""
        if self._learner is None:
            return
        workload = self._learner.add(pod_type)
        if workload is not None:
            self._pending = workload

    def _capacity(self, shape: PodShape, table: NodeTable) -> UsableCapacity:
        if self._usable is None and self._pending is None:
            # asked before any pod was seen: this pod is the whole workload
            self.learn(PodType(shape.cpu_milli, shape.milli if shape.gpu else 0, shape.count))
        if self._pending is not None:  # a new workload: weigh its whole-GPU types by the nodes there are now
            earlier, self._usable = self._usable, UsableCapacity(self._pending, self.whole_weight, table)
            if earlier is not None:
                self._usable.keep_from(earlier)
            self._pricer.update(self._pending, self._learner.seen if self._learner is not None else None)
            self._pending = None
            learned = self._learner.seen if self._learner is not None else None
            # a handful of pods says little of the workload's CPU per GPU: nothing kept until KEEP_AFTER
            self._kept_rate = (
                _kept_rate(self._usable, table, self.cpu_reserve) if learned is None or learned >= KEEP_AFTER else 0.0
            )
            self._drop_caches()
        assert self._usable is not None
        return self._usable

    def _slice_rate(self, capacity: UsableCapacity) -> float:
        """CPU milli a MIG node keeps per free slice milli from GPU-less pods (see `_spare_nodes_first`)."""
        return self.cpu_reserve * capacity.gpu_pod_cpu_rate

    def keeps_cpu(self) -> bool:
        """`KeepsCpu`: whether `cpu_kept` may hold rows back (a new workload, not weighed yet, may)."""
        return bool(self._kept_rate) or self._pending is not None

    def cpu_kept(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> npt.NDArray[np.bool_] | None:
        """`KeepsCpu`: for a pod asking no GPU, the rows where it would take a GPU node's free CPU
        below what the node's free GPU milli needs at the learned GPU pods' CPU per GPU milli (times
        `cpu_reserve`); None while the cluster's CPU is not the scarce resource (see `_kept_rate`)."""
        if shape.gpu:
            return None
        table = ctx.table
        capacity = self._capacity(shape, table)
        rate = self._kept_rate
        if not rate:
            return None
        left = table.cpu_free[rows] - shape.cpu_milli
        kept: npt.NDArray[np.bool_] = left < rate * table.gpu_sum[rows]
        # with fewer nodes open to it, the pod must not fall back on the kept hosts of rare types
        spoiled = (
            self._rare.spoiled(capacity.rare, capacity.rare_share, capacity.pod_milli, shape, table)
            if capacity.rare
            else None
        )
        if spoiled is not None:
            marked = np.zeros(table.rows, np.bool_)
            marked[spoiled] = True
            kept |= marked[rows]
        return kept

    # -- the policy ------------------------------------------------------------------------
    def score_key(self, ctx: PolicyContext, shape: PodShape) -> Hashable | None:
        """`RowLocalPolicy`: a row's score is its cached value by row version (`ShapeCache`), for the
        shape and the usable capacity of the current workload, unless hosts of rare types are kept
        (which counts hosts over the whole table)."""
        capacity = self._capacity(shape, ctx.table)
        return None if capacity.rare else (capacity, shape)

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        table = ctx.table
        capacity = self._capacity(shape, table)
        if len(self._nodes.states) > MEMO_LIMIT:  # a live scheduler sees endless states (a given workload too)
            self._nodes = NodeStates()
            self._afters.clear()
            self._drop_caches()
        cache = self._shapes.get(shape)
        if cache is None:
            cache = self._shapes[shape] = ShapeCache(np.int64)
        stale = cache.stale(table, rows)
        if stale.size:  # only rows whose score is stale need their node state
            self._nodes.refresh(table, stale)
            cache.store(table, stale, self._rescore(capacity, shape, cache, table, stale))
        spoiled = (
            self._rare.spoiled(capacity.rare, capacity.rare_share, capacity.pod_milli, shape, table)
            if capacity.rare
            else None
        )
        if spoiled is None:
            scores: IntArray = cache.values(table, rows)
            return scores if shape.gpu else _spare_nodes_first(scores, table, rows, shape, self._slice_rate(capacity))
        every = cache.value[: table.rows].copy()  # penalise by row, then pick the candidates
        every[spoiled] -= HOST_PENALTY  # the pod goes there only when no other node can take it
        picked: IntArray = every if table.all_active(rows) else every[rows]
        return picked if shape.gpu else _spare_nodes_first(picked, table, rows, shape, self._slice_rate(capacity))

    @staticmethod
    def _scores(loss: FloatArray) -> IntArray:
        """FGD's integer score of a fragmentation change, for losses: 50 for none, one point less per
        about 40 milli of loss near zero (0 for a loss so large that its exponential overflows)."""
        with np.errstate(over="ignore"):
            scores: IntArray = np.floor(100.0 / (1.0 + np.exp(loss / 1000.0))).astype(np.int64)
        return scores

    @classmethod
    def _score_list(cls, losses: list[float]) -> list[int]:
        """`_scores` of a few losses (between two pods), in plain floats: numpy costs more than the
        arithmetic. `math.exp` and numpy's `exp` may differ in the last bit, which moves the floor only
        where the score is within a hair of an integer: those few take numpy's, so the scores are
        always `_scores`'s."""
        if len(losses) > SMALL_COMPUTE:
            many: list[int] = cls._scores(np.array(losses)).tolist()
            return many
        out = []
        for loss in losses:
            try:
                score = 100.0 / (1.0 + math.exp(loss / 1000.0))
            except OverflowError:  # numpy: exp is inf, the score 0
                score = 0.0
            whole = math.floor(score)
            if score - whole < SCORE_EDGE or whole + 1 - score < SCORE_EDGE:
                whole = int(cls._scores(np.array([loss]))[0])
            out.append(whole)
        return out

    def _rescore(
        self, capacity: UsableCapacity, shape: PodShape, cache: ShapeCache, table: NodeTable, rows: IntArray
    ) -> list[float] | IntArray:
        """The score of each stale row, by (node state, CPU buckets before and after the pod)."""
        if rows.size <= SMALL_RESCORE:  # the usual case between two pods: a row or two; numpy costs more
            cpu_list = table.cpu_free[rows].tolist()
            before_list, after_list = [], []
            need = shape.cpu_milli
            for row, c in zip(rows.tolist(), cpu_list, strict=True):
                gpus = int(table.gpu_room[row])
                before_list.append((int(self._nodes.id[row]) << BUCKET_BITS) | capacity.bucket_of(c, gpus))
                after_list.append(capacity.bucket_of(c - need, gpus))
            return self._score_keys(capacity, shape, cache, before_list, after_list, cpu_list)
        # Many rows (a new shape, or all of them after a relearn) share few keys: score each key once.
        cpu = table.cpu_free[rows]
        gpus_free = table.gpu_room[rows]
        before = (self._nodes.id[rows] << BUCKET_BITS) | capacity.bucket(cpu, gpus_free)
        after = capacity.bucket(cpu - shape.cpu_milli, gpus_free)
        order = np.lexsort((after, before))
        before_sorted, after_sorted = before[order], after[order]
        first = np.ones(rows.size, np.bool_)
        first[1:] = (before_sorted[1:] != before_sorted[:-1]) | (after_sorted[1:] != after_sorted[:-1])
        inverse = np.empty(rows.size, np.int64)
        inverse[order] = np.cumsum(first) - 1
        at = order[first]  # a row of each distinct key (any row of a key scores alike)
        scores = self._score_keys(capacity, shape, cache, before[at].tolist(), after[at].tolist(), cpu[at].tolist())
        distinct: IntArray = np.array(scores, np.int64)[inverse]
        return distinct

    def _score_keys(
        self,
        capacity: UsableCapacity,
        shape: PodShape,
        cache: ShapeCache,
        before_list: list[int],
        after_list: list[int],
        cpu_list: list[int],
    ) -> list[float]:
        """The score of each (node state, CPU bucket before, CPU bucket after), from the shape's cache
        or worked out for the missing ones in one batch; `cpu_list` holds a free CPU in each bucket."""
        keys = [(b << BUCKET_BITS) | a for b, a in zip(before_list, after_list, strict=True)]
        by_key = cache.by_key
        missing = {k: i for i, k in enumerate(keys) if k not in by_key}
        if missing:
            if len(by_key) > MEMO_LIMIT:
                by_key.clear()
            at = list(missing.values())
            scores = self._score_states(
                capacity,
                shape,
                [before_list[i] for i in at],
                [after_list[i] for i in at],
                [cpu_list[i] for i in at],
            )
            by_key.update(zip(missing, scores, strict=True))
        return [by_key[k] for k in keys]

    def _score_states(
        self,
        capacity: UsableCapacity,
        shape: PodShape,
        before: list[int],
        after: list[int],
        cpu: list[int],
    ) -> list[int]:
        """The score of each (node state, CPU buckets) key: that of the least loss over the pod's
        placements, all usable capacities computed in one batch; a single share's placements also
        pay their waste at the share prices (prices.SharePricer), and their scores by GPU are kept
        for `choose`."""
        nodes = self._nodes
        keys: list[int] = []
        states: list[NodeState] = []
        cpus: list[int] = []
        spans: list[tuple[int, list[tuple[int, int]]]] = []
        waste = self._pricer.waste(shape)
        for key, bucket, c in zip(before, after, cpu, strict=True):
            sid = key >> BUCKET_BITS
            afters = self._after_states(shape, sid)
            spans.append((len(keys), afters))
            keys.append(key)
            states.append(nodes.states[sid])
            cpus.append(c)
            left = c - shape.cpu_milli
            for _, after_id in afters:
                keys.append((after_id << BUCKET_BITS) | bucket)
                states.append(nodes.states[after_id])
                cpus.append(left)
        values = capacity.values(keys, states, cpus)
        if waste is None:
            losses = [values[start] - max(values[start + 1 : start + 1 + len(afters)]) for start, afters in spans]
        else:
            losses = [
                values[start] - max([values[start + 1 + j] - waste[g] for j, (g, _) in enumerate(afters)])
                for start, afters in spans
            ]
        if len(spans) > SMALL_RESCORE or not _single_share(shape):
            return self._score_list(losses)
        # A few keys (rows changed since the last pod, one of which the next pod often takes): a single
        # share's GPU choice (`choose`) on them, scored in the same batch, with the losses
        # `_value_scores` works out, term for term, so that `choose` finds them instead.
        for start, afters in spans:
            base = values[start]
            losses.extend(
                base - values[start + 1 + j] + (waste[g] if waste is not None else 0.0)
                for j, (g, _) in enumerate(afters)
            )
        scores = self._score_list(losses)
        at = len(spans)
        choices = self._choices
        if len(choices) > MEMO_LIMIT:
            choices.clear()
        for key, bucket, (_, afters) in zip(before, after, spans, strict=True):
            choices[(shape, key >> BUCKET_BITS, key & BUCKET_MASK, bucket)] = {
                g: sc for (g, _), sc in zip(afters, scores[at : at + len(afters)], strict=True)
            }
            at += len(afters)
        return scores[: len(spans)]

    def _after_states(self, shape: PodShape, sid: int) -> list[tuple[int, int]]:
        """Each distinct placement of the pod on node state `sid`: the free milli of the GPU it uses
        and the node state (id) it leaves. They do not depend on the workload, so they outlive a
        relearn (rescoring every node after one is most of what a relearn costs)."""
        key = (shape, sid)
        found = self._afters.get(key)
        if found is None:
            if len(self._afters) > MEMO_LIMIT:
                self._afters.clear()
            model, ms = self._nodes.states[sid]
            found = self._afters[key] = [
                (value, self._nodes.intern((model, free))) for value, free in placements(shape, ms)
            ]
        return found

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        """Whole GPUs: the lowest-index fitting GPUs. A multi-GPU share: the least free fitting ones.
        A single share: the GPU with the best score, the lowest index on ties. Each is the placement
        the node's score assumed."""
        if req.kind is GpuKind.WHOLE or req.core_milli >= MILLI or req.count > 1 or not fitting.size:
            return best_fit_gpus(ctx, req, row, fitting)
        capacity = self._capacity(shape, ctx.table)
        table = ctx.table
        self._nodes.refresh(table, np.array([row]))
        sid = int(self._nodes.id[row])
        cpu = int(table.cpu_free[row])
        gpus = int(table.gpu_room[row])
        b0, b1 = capacity.bucket_of(cpu, gpus), capacity.bucket_of(cpu - shape.cpu_milli, gpus)
        key = (shape, sid, b0, b1)
        by_value = self._choices.get(key)
        if by_value is None:  # nodes in the same state choose alike: remember it
            if len(self._choices) > MEMO_LIMIT:
                self._choices.clear()
            by_value = self._choices[key] = self._value_scores(capacity, shape, sid, b0, b1, cpu)
        return best_gpu(by_value, table, row, fitting)

    def _value_scores(
        self, capacity: UsableCapacity, shape: PodShape, sid: int, b0: int, b1: int, cpu: int
    ) -> dict[int, int]:
        """The score of each distinct placement on a node state, by the free value of the GPU used."""
        afters = self._after_states(shape, sid)
        states = self._nodes.states
        keys = [(sid << BUCKET_BITS) | b0, *((after << BUCKET_BITS) | b1 for _, after in afters)]
        values = capacity.values(
            keys, [states[sid], *(states[after] for _, after in afters)], [cpu] + [cpu - shape.cpu_milli] * len(afters)
        )
        waste = self._pricer.waste(shape)
        losses = [
            values[0] - u + (waste[g] if waste is not None else 0.0)
            for u, (g, _) in zip(values[1:], afters, strict=True)
        ]
        scores = self._score_list(losses)
        return {v: sc for (v, _), sc in zip(afters, scores, strict=True)}


def _single_share(shape: PodShape) -> bool:
    """A pod of one share of one GPU: the pods whose GPU `choose` picks by score."""
    return shape.gpu and not shape.whole and shape.count == 1 and shape.milli < MILLI


def _spare_nodes_first(
    scores: IntArray, table: NodeTable, rows: IntArray, shape: PodShape, slice_rate: float
) -> IntArray:
    """A GPU-less pod's scores with `NO_GPU_BONUS` on the rows with no usable GPU (see the module
    docstring); the scores as they were where every row has one. A node in MIG mode whose free CPU,
    after the pod, falls short of `slice_rate` times its free slices' GPU milli loses the bonus
    instead (its free slices keep their CPU; `MIG_SHORT`)."""
    spare = table.gpu_usable[rows] == 0
    if not spare.any():
        return scores
    bonus = NO_GPU_BONUS * spare.astype(np.int64)
    if slice_rate and table.mig:
        at = np.flatnonzero(spare)
        free = np.array([_slice_milli(table.mig.get(r)) for r in rows[at].tolist()], np.float64)
        short = table.cpu_free[rows[at]] - shape.cpu_milli < slice_rate * free
        bonus[at[short]] = -NO_GPU_BONUS
    bumped: IntArray = scores + bonus
    return bumped


def _slice_milli(gpus: dict[int, MigGpuState] | None) -> int:
    """The GPU milli of a node's MIG slices no pod holds (memory slices free over the GPU's slices)."""
    if not gpus:
        return 0
    return sum((st.geometry.slices - st.occupied.bit_count()) * MILLI // st.geometry.slices for st in gpus.values())


def _kept_rate(capacity: UsableCapacity, table: NodeTable, reserve: float) -> float:
    """CPU milli per free GPU milli that GPU nodes keep from GPU-less pods: `reserve` times the
    learned GPU pods' CPU per GPU milli, once the learned pods ask more CPU per GPU milli than the
    cluster's GPU nodes have (CPU, not GPUs, runs out first); else 0 (nothing kept)."""
    if not reserve or not capacity.gpu_pod_cpu_rate:
        return 0.0
    rows = table.active_rows()
    gpus = table.gpu_usable[rows]
    has = gpus > 0
    cluster = float(table.cpu_total[rows][has].sum()) / float(gpus[has].sum() * MILLI) if has.any() else 0.0
    return reserve * capacity.gpu_pod_cpu_rate if capacity.cpu_rate > cluster else 0.0


def _host_rarity(capacity: UsableCapacity, table: NodeTable) -> FloatArray:
    """Per type of k whole GPUs: (nodes with at least k GPUs) / (those that also have the type's CPU),
    from the nodes' capacity (1 where no node can host the type). A type only a few nodes can ever host
    (say 8 GPUs and 120 cores, where most 8-GPU nodes have 96) keeps more of its weight, so those
    nodes' CPU is not spent on pods that could go elsewhere."""
    n = table.rows
    gpus, cpu = table.gpu_count[:n], table.cpu_total[:n]
    out = np.ones(capacity.count.size, np.float64)
    for i in np.flatnonzero(capacity.whole).tolist():
        with_gpus = gpus >= capacity.count[i]
        hosts = int(np.count_nonzero(with_gpus & (cpu >= capacity.cpu[i])))
        if hosts:
            out[i] = int(np.count_nonzero(with_gpus)) / hosts
    return out
