"""`resource-strategy-fit` (Volcano's, 1.13 and later): a node score per resource, `LeastAllocated`
(more left free after placing is better) or `MostAllocated` (fuller is better), each with a weight,
set per resource in the conf or per pod by annotation; optionally SRA, which keeps pods that do not
need a scarce resource off the nodes that have it, and a proportional filter that keeps CPU and memory
free beside a scarce resource.

Arguments (Volcano's keys and defaults):
- `resourceStrategyFitWeight` (10; missing, not a number or negative: 10): the plugin's weight;
- `resources`: resource name -> `{type, weight}` (default `cpu` and `memory`, both LeastAllocated,
  weight 1); a name may end in one `*` (`nvidia.com/*`; the longest matching prefix wins); `*` alone or
  a `*` elsewhere is left out with a warning; a weight of 0 or less is 1; another type is
  LeastAllocated;
- `sra: {enable, resources: "a,b", weight, resourceWeight: {a: 1}}`;
- `proportional: {enable, resources: "a,b", resourceProportion: {a.cpu: 4, a.memory: 8}}` (CPUs and
  GB kept per idle unit; unset or negative: 1).

Score of a node for a pod: over the resources the pod asks for that the conf names (or, with the pod's
annotation `volcano.sh/resource-strategy-scoring-type`, those its `volcano.sh/resource-strategy-weight`
JSON names), `weight_r x (used_r + asked_r) / allocatable_r` for MostAllocated, `weight_r x
(allocatable_r - used_r - asked_r) / allocatable_r` for LeastAllocated, summed and divided by the
weights' sum, times 100 times the plugin's weight; a node where the pod's request would pass a
resource's allocatable scores 0, and a resource the node has none of scores 0 (its weight still
counts). The type annotation without a readable weight annotation scores 0. SRA adds, where the node
has every resource the pod asks for, `(1 - sum of the weights of SRA resources the node has / their
sum) x 100 x sra.weight`. The proportional filter fails a pod that asks for none of its resources on a
node whose idle ones need more CPU or memory than would be left (unresolvable: evicting cannot help
Volcano's either).

Resources: `cpu` (milli), `memory` (bytes), the protocol's GPU names (`gpu` and `core` as GPU compute,
as `binpack` reads them) and any other resource the nodes advertise, by name. GPU memory is not scored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtimekit.kube.objects import annotations_of
from runtimekit.model.scalars import amount_of
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin, RowLocalPredicate, RowLocalScores, Rows, Scores
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.values import Mask, Verdict
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.proportional import proportional_shortfalls

NAME = "resource-strategy-fit"
log = logging.getLogger(__name__)
MAX_NODE_SCORE = 100  # kube-scheduler's MaxNodeScore
DEFAULT_WEIGHT = 10
LEAST, MOST = "LeastAllocated", "MostAllocated"
TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"
KNOWN = {"resourceStrategyFitWeight", "resources", "sra", "proportional", "logLevel"}


@dataclass(frozen=True)
class Strategy:
    kind: str  # LeastAllocated or MostAllocated
    weight: int


@dataclass(frozen=True)
class StrategyFitArgs:
    weight: int = DEFAULT_WEIGHT
    resources: Mapping[str, Strategy] = field(
        default_factory=lambda: {"cpu": Strategy(LEAST, 1), "memory": Strategy(LEAST, 1)}
    )
    sra_weight: int = 0
    sra: Mapping[str, int] = field(default_factory=dict)  # SRA resource -> its weight
    proportional: Mapping[str, tuple[float, float]] | None = None  # resource -> (CPUs, GB) per idle unit


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _names(value: object) -> list[str]:
    return [n.strip() for n in str(value or "").split(",") if n.strip()]


def _valid_pattern(name: str) -> bool:
    return "*" not in name or (name != "*" and name.endswith("*") and name.count("*") == 1)


def parse_args(arguments: Arguments, warn: Any) -> StrategyFitArgs:
    """Volcano's arguments, read as Volcano reads them: a bad value takes its default (with a warning
    here); see the module docstring."""
    for key in sorted(set(arguments) - KNOWN):
        warn(f"{NAME}: argument {key!r} means nothing to Volcano's plugin either; ignored")
    weight = _int(arguments.get("resourceStrategyFitWeight"), DEFAULT_WEIGHT)
    weight = weight if weight >= 0 else DEFAULT_WEIGHT
    raw = arguments.get("resources")
    resources: dict[str, Strategy] = {}
    if isinstance(raw, Mapping) and raw:
        for name, spec in raw.items():
            if not _valid_pattern(str(name)):
                warn(f"{NAME}: resource pattern {name!r} left out: only one trailing '*' is supported")
                continue
            given: Mapping[str, object] = spec if isinstance(spec, Mapping) else {}
            kind = given.get("type")
            strength = _int(given.get("weight"), 0)
            resources[str(name)] = Strategy(
                str(kind) if kind in (LEAST, MOST) else LEAST, strength if strength > 0 else 1
            )
    elif raw is not None and not (isinstance(raw, Mapping) and not raw):
        warn(f"{NAME}: 'resources' must map resource names to {{type, weight}}; cpu and memory are used")
    args = StrategyFitArgs(weight, resources) if resources else StrategyFitArgs(weight)
    sra = arguments.get("sra")
    if isinstance(sra, Mapping) and sra.get("enable") is True:
        found = sra.get("resourceWeight")
        weights: Mapping[str, object] = found if isinstance(found, Mapping) else {}
        chosen: dict[str, int] = {}
        for name in _names(sra.get("resources")):
            share = _int(weights.get(name), 1)
            chosen[name] = share if share >= 0 else 1
        args = StrategyFitArgs(args.weight, args.resources, _int(sra.get("weight"), 0), chosen)
    proportional = arguments.get("proportional")
    if isinstance(proportional, Mapping) and proportional.get("enable") is True:
        rates = proportional.get("resourceProportion")
        rates = rates if isinstance(rates, Mapping) else {}
        kept: dict[str, tuple[float, float]] = {}
        for name in _names(proportional.get("resources")):
            cpu, memory = (_rate(rates.get(f"{name}.{kind}")) for kind in ("cpu", "memory"))
            kept[name] = (cpu, memory)
        args = StrategyFitArgs(args.weight, args.resources, args.sra_weight, args.sra, kept)
    return args


def _rate(value: object) -> float:
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        return 1.0
    try:
        rate = float(value)
    except ValueError:
        return 1.0
    return rate if rate >= 0 else 1.0


def _configured(name: str, resources: Mapping[str, Strategy]) -> Strategy | None:
    """The strategy of a resource: its own entry, else the wildcard with the longest prefix."""
    found = resources.get(name)
    if found is not None:
        return found
    best, best_len = None, -1
    for pattern, strategy in resources.items():
        if pattern.endswith("*") and name.startswith(pattern[:-1]) and len(pattern) - 1 > best_len:
            best, best_len = strategy, len(pattern) - 1
    return best


class ResourceStrategyFit(Plugin, RowLocalScores):
    """See the module docstring."""

    name = NAME

    def __init__(self, args: StrategyFitArgs, gpu_names: tuple[str, ...]) -> None:
        self.args = args
        self.gpu_names = gpu_names  # the protocol's whole-GPU and core names: GPU compute here

    # -- what a pod asks, what a node has ----------------------------------------------------
    def asked(self, task: TaskInfo) -> dict[str, int]:
        """The resources the pod asks for, by name (Volcano's Resreq.ResourceNames)."""
        request = task.request
        out = {"cpu": request.cpu_milli, "memory": request.memory_bytes}
        if request.uses_gpu:
            out.update(dict.fromkeys(self.gpu_names, request.gpu_milli))
        out.update(dict(request.scalars))
        return {name: amount for name, amount in out.items() if amount > 0}

    def _columns(self, name: str, rows: Rows, ssn: SessionView) -> tuple[np.ndarray, np.ndarray]:
        """(allocatable, used) per row of one resource."""
        table = ssn.table
        if name == "cpu":
            cap = table.cpu_total[rows].astype(np.float64)
            return cap, cap - table.cpu_free[rows]
        if name == "memory":
            cap = table.mem_total[rows].astype(np.float64)
            return cap, cap - table.mem_free[rows]
        if name in self.gpu_names:
            cap = table.gpu_usable[rows].astype(np.float64) * 1000
            return cap, cap - np.maximum(table.gpu_sum[rows], 0)
        names = table.names()
        cap = np.array(
            [amount_of(table.capacity(str(names[r])).scalars, name) if names[r] else 0 for r in rows], np.float64
        )
        free = table.scalar_free.get(name)
        return cap, (cap - free[rows]) if free is not None else cap

    def _pod_strategies(self, task: TaskInfo) -> dict[str, Strategy] | None:
        """The pod's own strategies by annotation; {} (score 0) when its weights cannot be read; None
        without the annotation."""
        notes = annotations_of(task.pod) if task.pod is not None else {}
        kind = notes.get(TYPE_ANNOTATION)
        if not kind:
            return None
        try:
            weights = json.loads(str(notes.get(WEIGHT_ANNOTATION) or ""))
        except json.JSONDecodeError:
            weights = None
        if not isinstance(weights, dict) or not all(isinstance(v, int) for v in weights.values()):
            log.info(
                "%s: pod %s/%s: %s without a readable %s",
                NAME,
                task.namespace,
                task.name,
                TYPE_ANNOTATION,
                WEIGHT_ANNOTATION,
            )
            return {}
        return {str(name): Strategy(str(kind), int(weight)) for name, weight in weights.items()}

    # -- NodeOrder ---------------------------------------------------------------------------
    def row_local_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        notes = annotations_of(task.pod) if task.pod is not None else {}
        return (task.request, notes.get(TYPE_ANNOTATION), notes.get(WEIGHT_ANNOTATION))

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        total = np.zeros(rows.size)
        asked = self.asked(task)
        if self.args.weight > 0:
            total += self._strategy_scores(task, asked, rows, ssn)
        if self.args.sra_weight > 0:
            total += self._sra_scores(asked, rows, ssn)
        return total

    def _strategy_scores(self, task: TaskInfo, asked: Mapping[str, int], rows: Rows, ssn: SessionView) -> Scores:
        own = self._pod_strategies(task)
        if own == {}:
            return np.zeros(rows.size)
        score, weights, broken = np.zeros(rows.size), 0, np.zeros(rows.size, np.bool_)
        for name, amount in asked.items():
            strategy = own.get(name) if own is not None else _configured(name, self.args.resources)
            if strategy is None:
                continue
            weights += strategy.weight
            if strategy.weight == 0 or strategy.kind not in (LEAST, MOST):
                continue
            cap, used = self._columns(name, rows, ssn)
            after = used + amount
            has = cap > 0
            broken |= has & (after > cap)
            safe = np.where(has, cap, 1.0)
            part = after / safe if strategy.kind == MOST else (cap - after) / safe
            score += np.where(has, part * strategy.weight, 0.0)
        if weights > 0:
            score /= weights
        score *= MAX_NODE_SCORE * self.args.weight
        score[broken] = 0.0
        return score

    def _sra_scores(self, asked: Mapping[str, int], rows: Rows, ssn: SessionView) -> Scores:
        lacking = np.zeros(rows.size, np.bool_)
        for name in asked:
            cap, _ = self._columns(name, rows, ssn)
            lacking |= cap <= 0
        held = np.zeros(rows.size)
        for name, weight in self.args.sra.items():
            cap, _ = self._columns(name, rows, ssn)
            held += np.where(cap > 0, float(weight), 0.0)
        total = sum(self.args.sra.values())
        if total > 0:
            held = 1.0 - held / total
        score = held * MAX_NODE_SCORE * self.args.sra_weight
        score[lacking] = 0.0
        return score


class ProportionalStrategyFit(ResourceStrategyFit, RowLocalPredicate):
    """`resource-strategy-fit` with its proportional filter on (its verdict on a row depends on the
    pod's request and the row alone)."""

    def predicate_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        return ("proportional", task.request)

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        found = proportional_shortfalls(ssn.table, rows, task.request, self.args.proportional or {}, self.gpu_names)
        failed: list[tuple[str, Mask]] = [(f"proportional of resource {name} check failed", m) for name, m in found]
        short = np.zeros(rows.size, np.bool_)
        for _, mask in failed:
            short |= mask
        return Verdict(~short, failed, short)


def build(arguments: Arguments, context: BuildContext) -> ResourceStrategyFit:
    args = parse_args(arguments, context.warn)
    gpu_names = (*context.protocol.names("gpu"), *context.protocol.names("core"))
    if args.proportional:
        return ProportionalStrategyFit(args, gpu_names)
    return ResourceStrategyFit(args, gpu_names)
