"""`nodeorder`: kube-scheduler's node scores, each normalised to 0-100 as kube-scheduler's plugin
does and multiplied by its weight (Volcano's nodeorder arguments), summed:

| argument (default) | score |
|---|---|
| `leastrequested.weight` (1) | NodeResourcesFit LeastAllocated: free CPU and memory after placing |
| `mostrequested.weight` (0) | NodeResourcesFit MostAllocated: the opposite |
| `balancedresource.weight` (1) | NodeResourcesBalancedAllocation: CPU and memory used alike |
| `nodeaffinity.weight` (2) | NodeAffinity: preferred node affinity, sum of matching weights |
| `podaffinity.weight` (2) | InterPodAffinity: preferred (anti-)affinity both ways, placed pods' required affinity |
| `tainttoleration.weight` (3) | TaintToleration: fewest untolerated PreferNoSchedule taints |
| `imagelocality.weight` (1) | ImageLocality: the pod's images already on the node |
| `podtopologyspread.weight` (2) | PodTopologySpread: ScheduleAnyway constraints, fewer matching pods |

The defaults are Volcano's. `podaffinity.hardPodAffinityWeight` (1, 0-100) is kube-scheduler's
InterPodAffinityArgs.HardPodAffinityWeight, the weight of a placed pod's required affinity term
that selects the incoming pod (Volcano builds the plugin with 0). SelectorSpread and volume
binding are not part of this scheduler: `selectorspread.weight` and `volumebinding.weight` are
accepted at 0 and refused otherwise; a negative weight is refused.

Node-level raw scores (preferred node affinity, taints, images) are cached per distinct pod term
until node metadata changes; inter-pod and spread scores read the session's topology counts (see
`kubestate`). Semantics: `runtimekit.scheduler.kubesem`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from runtimekit.kube.semantics.nodeaffinity import preferred_score
from runtimekit.model import NodeTable
from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, parse_arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import RowLocalScores, Rows, Scores
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem import interpod, spread, spreading, taints
from runtimekit.scheduler.kubesem.scores import default_normalize, image_score
from runtimekit.scheduler.plugins import kubestate

WEIGHTS = (
    "leastrequested",
    "mostrequested",
    "balancedresource",
    "nodeaffinity",
    "podaffinity",
    "tainttoleration",
    "imagelocality",
    "podtopologyspread",
)
NOT_HERE = {
    "selectorspread": "SelectorSpread is not part of this scheduler (use podtopologyspread)",
    "volumebinding": "volume binding is not part of this scheduler",
}


@dataclass(frozen=True)
class NodeOrderArgs:
    leastrequested: float = 1.0
    mostrequested: float = 0.0
    balancedresource: float = 1.0
    nodeaffinity: float = 2.0
    podaffinity: float = 2.0
    tainttoleration: float = 3.0
    imagelocality: float = 1.0
    podtopologyspread: float = 2.0
    hard_pod_affinity_weight: int = 1
    selectorspread: float = 0.0
    volumebinding: float = 0.0

    def __post_init__(self) -> None:
        for name in (*WEIGHTS, *NOT_HERE):
            if getattr(self, name) < 0:
                raise ArgumentError(f"nodeorder: {name}.weight must not be negative")
        for name, why in NOT_HERE.items():
            if getattr(self, name):
                raise ArgumentError(f"nodeorder: {name}.weight: only 0 is supported: {why}")
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise ArgumentError("nodeorder: podaffinity.hardPodAffinityWeight must be in 0-100")


def _fraction(table: NodeTable, total: np.ndarray, free: np.ndarray, request: int, rows: Rows) -> np.ndarray:
    """The share of each row's `total` used once the request is placed, clipped to [0, 1]: these run
    per pod over every feasible node, so each step writes into the array the step before made (the
    same operations in the same order as `clip((cap - free + request) / cap, 0, 1)`: the same bits)."""
    cap = np.maximum(table.at_rows(total, rows), 1)
    used = np.subtract(cap, table.at_rows(free, rows))
    used += request
    fraction: np.ndarray = np.divide(used, cap)
    return np.clip(fraction, 0, 1, out=fraction)


def _weighted(part: np.ndarray, weight: float, score: np.ndarray | None) -> np.ndarray:
    """`score + weight * floor(part)`, reusing `part` (a weight of 1 multiplies by nothing: same bits)."""
    np.floor(part, out=part)
    if weight != 1.0:
        part *= weight
    if score is None:  # 0.0 + x is x
        return part
    score += part
    return score


def _resource_scores(args: NodeOrderArgs, ssn: SessionView, task: TaskInfo, rows: Rows) -> np.ndarray | None:
    """leastrequested, mostrequested and balancedresource, summed in that order, or None if all are off."""
    table, request = ssn.table, task.request
    cpu = _fraction(table, table.cpu_total, table.cpu_free, request.cpu_milli, rows)
    mem = _fraction(table, table.mem_total, table.mem_free, request.memory_bytes, rows)
    score: np.ndarray | None = None
    if args.leastrequested or args.mostrequested:
        mean = cpu + mem
        mean /= 2
        most = mean * 100 if args.mostrequested else None
        if args.leastrequested:
            np.subtract(1, mean, out=mean)
            mean *= 100
            score = _weighted(mean, args.leastrequested, score)
        if most is not None:
            score = _weighted(most, args.mostrequested, score)
    if args.balancedresource:
        balance = np.subtract(cpu, mem)
        np.abs(balance, out=balance)
        balance /= 2
        np.subtract(1, balance, out=balance)
        balance *= 100
        score = _weighted(balance, args.balancedresource, score)
    return score


def _few_resource_scores(args: NodeOrderArgs, ssn: SessionView, task: TaskInfo, rows: Rows) -> np.ndarray | None:
    """`_resource_scores` for a few rows (the ones a placement changed, when the session keeps the
    others' scores): the same IEEE operations in the same order on plain floats, which cost less than
    numpy's per-call overhead; the same bits (the fractions are of int64s cast to float64, as numpy's
    true divide does, and clipped to [0, 1]; floor is exact on these values)."""
    if not (args.leastrequested or args.mostrequested or args.balancedresource):
        return None
    table, request = ssn.table, task.request
    cpu_request, mem_request = request.cpu_milli, request.memory_bytes
    out: list[float] = []
    for row in rows.tolist():
        cap = max(int(table.cpu_total[row]), 1)
        cpu = min(max(float(cap - int(table.cpu_free[row]) + cpu_request) / float(cap), 0.0), 1.0)
        cap = max(int(table.mem_total[row]), 1)
        mem = min(max(float(cap - int(table.mem_free[row]) + mem_request) / float(cap), 0.0), 1.0)
        score: float | None = None
        if args.leastrequested or args.mostrequested:
            mean = (cpu + mem) / 2
            if args.leastrequested:
                score = _weighted_one((1 - mean) * 100, args.leastrequested, score)
            if args.mostrequested:
                score = _weighted_one(mean * 100, args.mostrequested, score)
        if args.balancedresource:
            score = _weighted_one((1 - abs(cpu - mem) / 2) * 100, args.balancedresource, score)
        assert score is not None
        out.append(score)
    return np.array(out, np.float64)


def _weighted_one(part: float, weight: float, score: float | None) -> float:
    """`_weighted` on one float."""
    part = float(math.floor(part))
    if weight != 1.0:
        part *= weight
    return part if score is None else score + part


FEW_ROWS = 8  # rows up to which resource scores are worked out on plain floats


class NodeOrderPlugin(kubestate.FollowsPlacements, RowLocalScores):
    name = "nodeorder"

    def __init__(self, args: NodeOrderArgs, kube: kubestate.KubeShared | None = None) -> None:
        super().__init__(kube)
        self.args = args
        self._raw: dict[tuple[str, Hashable, int], np.ndarray] = {}

    # -- node-level raw scores, cached per distinct pod term -------------------------------
    def _per_node(self, kind: str, key: Hashable, ssn: SessionView, compute: Callable[[], np.ndarray]) -> np.ndarray:
        cache_key = (kind, key, self.kube.scope(ssn).serial)
        found = self._raw.get(cache_key)
        if found is None:
            if len(self._raw) > 512:
                self._raw.clear()
            found = self._raw[cache_key] = compute()
        return found

    def _preferred_nodes(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> np.ndarray | None:
        terms = kubestate.facts(task, ssn).preferred_nodes
        if not terms:
            return None
        metas = ssn.snapshot.meta

        def compute() -> np.ndarray:
            return np.array(
                [preferred_score(terms, m.labels, m.name) if m is not None else 0 for m in metas[: ssn.table.rows]],
                np.float64,
            )

        return default_normalize(self._per_node("affinity", terms, ssn, compute)[rows])

    def _taint_counts(self, task: TaskInfo, ssn: SessionView) -> np.ndarray:
        """Untolerated PreferNoSchedule taints per row (of every row)."""
        tolerations = task.constraints.tolerations
        metas = ssn.snapshot.meta

        def compute() -> np.ndarray:
            return np.array(
                [
                    taints.intolerable_prefer_no_schedule(m.taints, tolerations) if m is not None else 0
                    for m in metas[: ssn.table.rows]
                ],
                np.float64,
            )

        return self._per_node("taints", tolerations, ssn, compute)

    def _taints(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> np.ndarray | None:
        return default_normalize(self._taint_counts(task, ssn)[rows], reverse=True)

    def _images(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> np.ndarray | None:
        facts = kubestate.facts(task, ssn)
        if not facts.images:
            return None
        metas = ssn.snapshot.meta[: ssn.table.rows]

        def compute() -> np.ndarray:
            spread_counts: dict[str, int] = {}  # how many nodes have each image
            for m in metas:
                for name, _size in m.images if m is not None else ():
                    spread_counts[name] = spread_counts.get(name, 0) + 1
            total = sum(1 for m in metas if m is not None)
            return np.array(
                [
                    image_score(facts.images, facts.containers, dict(m.images), spread_counts, total) if m else 0
                    for m in metas
                ],
                np.float64,
            )

        return self._per_node("images", (facts.images, facts.containers), ssn, compute)[rows]

    # -- scores of the session's pods ------------------------------------------------------
    def _pod_affinity(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> np.ndarray | None:
        facts = kubestate.facts(task, ssn)
        if facts.problem:
            return None
        own = facts.preferred_affinity or facts.preferred_anti_affinity
        kube = self.kube.session(ssn)
        if not own and not kube.index.has_terms:
            return None
        raw = interpod.raw_scores(kube.index, kube.topology, facts, rows, self.args.hard_pod_affinity_weight)
        return None if raw is None else interpod.normalize(raw)

    def _spread(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> np.ndarray | None:
        facts = kubestate.facts(task, ssn)
        soft = [c for c in facts.spread if not c.hard]
        if not soft:
            return None
        kube = self.kube.session(ssn)
        affinity, tolerated = self.kube.node_masks(task.constraints, ssn)
        return spread.score(spreading.inputs(soft, facts, kube.index, kube.topology, affinity, tolerated), rows)

    def row_local_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """Row-local (`RowLocalScores`) unless a part the pod gets is normalised over the rows scored
        (preferred node affinity; taints, unless no node has one the pod does not tolerate, when
        every row gets 100) or reads the session's other pods (inter-pod affinity, spreading)."""
        a, facts = self.args, kubestate.facts(task, ssn)
        if a.nodeaffinity and facts.preferred_nodes:
            return None
        if a.podtopologyspread and any(not c.hard for c in facts.spread):
            return None
        own = facts.preferred_affinity or facts.preferred_anti_affinity
        if a.podaffinity and not facts.problem and (own or self.kube.session(ssn).index.has_terms):
            return None
        if a.tainttoleration and self._taint_counts(task, ssn).any():
            return None
        images = (facts.images, facts.containers) if a.imagelocality and facts.images else None
        request = task.request
        return (self.kube.scope(ssn).serial, request.cpu_milli, request.memory_bytes, images)

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        a = self.args
        score = np.zeros(rows.size)
        if a.leastrequested or a.mostrequested or a.balancedresource:
            few = rows.size <= FEW_ROWS
            resources = (_few_resource_scores if few else _resource_scores)(a, ssn, task, rows)
            if resources is not None:
                score = resources
        parts: tuple[tuple[float, Callable[[TaskInfo, Rows, SessionView], np.ndarray | None]], ...] = (
            (a.nodeaffinity, self._preferred_nodes),
            (a.tainttoleration, self._taints),
            (a.imagelocality, self._images),
            (a.podaffinity, self._pod_affinity),
            (a.podtopologyspread, self._spread),
        )
        for weight, part in parts:
            if weight:
                found = part(task, rows, ssn)
                if found is not None:
                    score += weight * found
        return score


def build(arguments: Arguments, context: BuildContext) -> NodeOrderPlugin:
    aliases = {f"{n}.weight": n for n in (*WEIGHTS, *NOT_HERE)}
    aliases["podaffinity.hardPodAffinityWeight"] = "hard_pod_affinity_weight"
    return NodeOrderPlugin(parse_arguments(NodeOrderArgs, "nodeorder", arguments, aliases), kubestate.shared(context))
