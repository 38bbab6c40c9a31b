"""`predicates`: kube-scheduler's node filters, as Volcano's predicates plugin runs them — in
kube-scheduler's order, the first failing one giving the node's reason:

NodeUnschedulable (cordoned nodes), NodeName (a preset spec.nodeName), TaintToleration (NoSchedule
and NoExecute), NodeAffinity (nodeSelector, required node affinity), NodePorts (host ports),
Volcano's proportional check, the volume filters (VolumeRestrictions, NodeVolumeLimits,
VolumeBinding, VolumeZone: `volumes/filters.py`), PodTopologySpread (DoNotSchedule constraints) and
InterPodAffinity (required affinity and anti-affinity, and the placed pods' anti-affinity). Removed
and not-ready nodes are rejected first. CPU, memory, pod count and extended resources are the
session's check.

With a volume filter on (the default, as in Volcano) the plugin is a `VolumePredicates`: it also
watches the storage objects (`Watches`) and binds volumes after the node is chosen (Reserve,
Unreserve, PreBind: `volumes/binder.py`). A pod without volumes costs the volume filters nothing.

The semantics are `runtimekit.scheduler.kubesem`'s. Node-level verdicts are cached per distinct
pod constraint until a node's labels, taints or schedulability change, so thousands of pods alike
cost one pass over the nodes; the inter-pod checks read per-session topology counts that the
session's placements and evictions keep current (see `kubestate`). A pod without inter-pod
affinity, spread constraints or host ports, in a cluster where no placed pod has required
anti-affinity, takes only the cached node-level path.

Arguments (Volcano's): `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`,
`predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`, `predicate.PodTopologySpreadEnable`
(default true) turn a filter off; `predicate.ProportionalEnable` with `predicate.resources` and
`predicate.resources.<name>.cpu|memory` keep CPU and memory in proportion to idle devices;
`predicate.CacheEnable` is accepted (verdicts are always cached here, exactly);
`predicate.NodeVolumeLimitsEnable`, `VolumeZoneEnable`, `VolumeBindingEnable` and the kit's
`VolumeRestrictionsEnable` (default true) switch the volume filters, `volumebinding.*` tune volume
binding (`predicate_args.py`). Filters this scheduler does not have (DRA, Volcano's GPU sharing) are
refused when switched on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np

from runtimekit.kube.semantics.tolerations import untolerated
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.info import NODE_NAME_REASON, Constraints, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    EVERY_ROW,
    Mask,
    PreBind,
    Reserve,
    RowLocalPredicate,
    Rows,
    Verdict,
    Watches,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import SUCCESS, Status
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem import interpod, nodeaffinity, ports, spread, spreading, taints
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.plugins import kubestate
from runtimekit.scheduler.plugins.predicate_args import PredicatesArgs, parse_predicates_args
from runtimekit.scheduler.plugins.proportional import proportional_shortfalls
from runtimekit.scheduler.plugins.volumes import filters as volume_filters
from runtimekit.scheduler.plugins.volumes.assumed import shared_assumptions
from runtimekit.scheduler.plugins.volumes.binder import VolumeBinder
from runtimekit.scheduler.plugins.volumes.filters import VolumeFilters, VolumeSwitches

REMOVED, NOT_READY = "node(s) were removed", "node(s) were not ready"
# reason codes: 0 passes; the order is the order of the filters
REASONS: tuple[str, ...] = (
    "",
    REMOVED,
    NOT_READY,
    taints.UNSCHEDULABLE_REASON,
    NODE_NAME_REASON,
    taints.REASON,
    nodeaffinity.REASON,
    ports.REASON,
    spread.LABEL_REASON,
    spread.REASON,
    interpod.AFFINITY_REASON,
    interpod.ANTI_AFFINITY_REASON,
    interpod.EXISTING_ANTI_AFFINITY_REASON,
    *volume_filters.REASONS,  # after the others: the codes above keep their numbers
)
CODE = {reason: i for i, reason in enumerate(REASONS)}
# failures an eviction may turn into a fit (the others are kube-scheduler's UnschedulableAndUnresolvable)
_RESOLVABLE = frozenset(
    CODE[reason]
    for reason in (
        ports.REASON,
        spread.REASON,
        interpod.ANTI_AFFINITY_REASON,
        interpod.EXISTING_ANTI_AFFINITY_REASON,
        *volume_filters.RESOLVABLE,
    )
)
_SPREAD = {spread.MISSING_LABEL: CODE[spread.LABEL_REASON], spread.TOO_SKEWED: CODE[spread.REASON]}
_INTERPOD = {
    interpod.AFFINITY: CODE[interpod.AFFINITY_REASON],
    interpod.ANTI_AFFINITY: CODE[interpod.ANTI_AFFINITY_REASON],
    interpod.EXISTING_ANTI_AFFINITY: CODE[interpod.EXISTING_ANTI_AFFINITY_REASON],
}
Codes = np.ndarray


class Predicates(kubestate.FollowsPlacements, RowLocalPredicate):
    name = "predicates"

    def __init__(
        self,
        args: PredicatesArgs | None = None,
        kube: kubestate.KubeShared | None = None,
        volumes: VolumeFilters | None = None,
    ) -> None:
        super().__init__(kube)
        self.args = args or PredicatesArgs()
        self.volumes = volumes  # the volume filters (None: all switched off)
        self._static: dict[tuple[Constraints, int], Codes] = {}
        self._open: set[tuple[Constraints, int]] = set()  # keys of `_static` where every node passes
        self._extra: dict[str, int] = {}  # reasons made on the fly (parse problems, proportional)

    # -- node-level filters, cached per constraint -----------------------------------------
    def _node_codes(self, constraints: Constraints, ssn: SessionView) -> Codes:
        key = (constraints, self.kube.scope(ssn).serial)
        found = self._static.get(key)
        if found is None:
            if len(self._static) > 256:
                self._static.clear()
                self._open.clear()
            metas = ssn.snapshot.meta
            found = np.array([self._node_code(constraints, metas[row]) for row in range(ssn.table.rows)], np.int8)
            self._static[key] = found
            if not found.any():
                self._open.add(key)
        return found

    def _simple(self, task: TaskInfo, ssn: SessionView) -> bool:
        """Whether every node passes the node-level filters for the task and it needs none of the
        per-pod ones (the usual pod: no selector, affinity, spread or ports, and no placed pod with
        required anti-affinity), so the predicate has nothing to compute."""
        args = self.args
        if args.proportional:
            return False
        facts = kubestate.facts(task, ssn)
        if facts.problem or not facts.simple or (facts.volumes is not None and self.volumes is not None):
            return False
        if args.pod_affinity and self.kube.session(ssn).index.has_anti_affinity:
            return False
        key = (task.constraints, self.kube.scope(ssn).serial)
        if key not in self._static:
            self._node_codes(task.constraints, ssn)
        return key in self._open

    def _node_code(self, constraints: Constraints, node: NodeMeta | None) -> int:
        args = self.args
        if node is None:
            return CODE[REMOVED]
        if not node.ready:
            return CODE[NOT_READY]
        if node.unschedulable and not taints.tolerates_unschedulable(constraints.tolerations):
            return CODE[taints.UNSCHEDULABLE_REASON]
        if constraints.node_name and constraints.node_name != node.name:
            return CODE[NODE_NAME_REASON]
        if args.taint_toleration and untolerated(node.taints, constraints.tolerations) is not None:
            return CODE[taints.REASON]
        if args.node_affinity and not constraints.matches_node(node):
            return CODE[nodeaffinity.REASON]
        return 0

    # -- the predicate ---------------------------------------------------------------------
    def predicate_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """Row-local (`RowLocalPredicate`) for the usual pod, which passes on every node (`_simple`);
        the others keep the full call."""
        return EVERY_ROW if self._simple(task, ssn) else None

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        if self._simple(task, ssn):
            return Verdict.all(rows.size)
        codes = self._node_codes(task.constraints, ssn)[rows]
        facts = kubestate.facts(task, ssn)
        args = self.args
        wants = (
            facts.problem
            or (args.node_ports and facts.ports)
            or (args.pod_topology_spread and any(c.hard for c in facts.spread))
            or args.proportional
            or (args.pod_affinity and (facts.affinity or facts.anti_affinity))
            or (facts.volumes is not None and self.volumes is not None)
        )
        if wants or (args.pod_affinity and self.kube.session(ssn).index.has_anti_affinity):
            open_rows = codes == 0
            if open_rows.any():
                codes = codes.astype(np.int16)
                codes[open_rows] = self._pod_codes(task, rows[open_rows], ssn)
        passed = codes == 0
        if np.count_nonzero(passed) == passed.size:
            return Verdict(passed)
        reasons = self.reason_texts()

        def explain() -> list[tuple[str, Mask]]:
            return [(reasons[int(code)], codes == code) for code in np.unique(codes[~passed])]

        def unresolvable() -> Mask:
            resolvable: Mask = np.isin(codes, list(_RESOLVABLE | set(self._resolvable_extra())))
            out: Mask = ~passed & ~resolvable
            return out

        return Verdict(passed, explain, unresolvable)

    def reason_texts(self) -> list[str]:
        texts = list(REASONS)
        for reason, code in self._extra.items():
            texts.extend([""] * (code + 1 - len(texts)))
            texts[code] = reason
        return texts

    def _resolvable_extra(self) -> list[int]:
        return [code for reason, code in self._extra.items() if reason.startswith("proportional")]

    def _code(self, reason: str) -> int:
        code = CODE.get(reason) or self._extra.get(reason)
        if code is None:
            if len(self._extra) > 64:  # parse problems are per pod: keep the table small
                self._extra.clear()
            code = self._extra[reason] = len(REASONS) + len(self._extra)
        return code

    def _pod_codes(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Codes:
        """Host ports, proportional, topology spread and inter-pod affinity for rows that passed
        the node-level filters: the code of the first that fails per row."""
        facts = kubestate.facts(task, ssn)
        out = np.zeros(rows.size, np.int16)
        if facts.problem:
            out[:] = self._code(facts.problem)
            return out
        args = self.args
        kube = self.kube.session(ssn)
        steps: list[Callable[[Rows], Codes]] = []
        if args.node_ports and facts.ports:
            conflicts = kube.index.port_conflicts(facts.ports)
            steps.append(lambda r: np.where(np.isin(r, conflicts), CODE[ports.REASON], 0))
        if args.proportional:
            steps.append(lambda r: self._proportional(task, r, ssn))
        if self.volumes is not None and facts.volumes is not None:
            steps.append(lambda r: self._volume_codes(task, facts, r, ssn, kube.index))
        hard = [c for c in facts.spread if c.hard]
        if args.pod_topology_spread and hard:
            affinity, tolerated = self.kube.node_masks(task.constraints, ssn)
            inputs = spreading.inputs(hard, facts, kube.index, kube.topology, affinity, tolerated)
            steps.append(lambda r: _mapped(spread.filter_codes(inputs, facts.labels, r), _SPREAD))
        if args.pod_affinity and interpod.needs_filter(facts, kube.index):
            steps.append(lambda r: _mapped(interpod.filter_codes(kube.index, kube.topology, facts, r), _INTERPOD))
        for step in steps:
            open_rows = out == 0
            if not open_rows.any():
                break
            out[open_rows] = step(rows[open_rows])
        return out

    def _volume_codes(self, task: TaskInfo, facts: PodFacts, rows: Rows, ssn: SessionView, index: PodIndex) -> Codes:
        """The volume filters' reason per row, as codes (prefilter problems carry their own words)."""
        assert self.volumes is not None
        found = self.volumes.reasons(task, facts, rows, ssn, index)
        return np.array([self._code(reason) if reason else 0 for reason in found], np.int16)

    def _proportional(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Codes:
        """Volcano's proportional predicate: a pod that asks for none of the listed resources must
        leave the CPU and memory the node's idle ones are entitled to."""
        args = self.args
        out = np.zeros(rows.size, np.int16)
        for name, short in proportional_shortfalls(ssn.table, rows, task.request, args.rates, (args.gpu_resource,)):
            out[short] = self._code(f"proportional of resource {name} check failed")
        return out


def _mapped(codes: np.ndarray, table: Mapping[int, int]) -> np.ndarray:
    out = np.zeros(codes.size, np.int16)
    for source, target in table.items():
        out[codes == source] = target
    return out


class VolumePredicates(Predicates, Reserve, PreBind, Watches):
    """`predicates` with a volume filter on: it watches the storage objects and binds the volumes of
    the pods it placed (see the module docstring)."""

    watches: tuple[str, ...] = ("persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes")

    def __init__(
        self,
        args: PredicatesArgs,
        kube: kubestate.KubeShared,
        volumes: VolumeFilters,
        binder: VolumeBinder | None,
    ) -> None:
        super().__init__(args, kube, volumes)
        self.filters, self.binder = volumes, binder

    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        if self.binder is None:
            return SUCCESS
        facts = kubestate.facts(task, ssn)
        if facts.volumes is None:
            return SUCCESS
        return self.binder.reserve(task, facts, self.filters.view(ssn), ssn)

    def unreserve(self, task: TaskInfo) -> None:
        if self.binder is not None:
            self.binder.unreserve(task)

    def pre_bind(self, binding: Binding) -> Status:
        return SUCCESS if self.binder is None else self.binder.pre_bind(binding)


def build(arguments: Arguments, context: BuildContext) -> Predicates:
    args = parse_predicates_args(arguments, context.protocol.resources.gpu)
    switches = VolumeSwitches(args.volume_restrictions, args.node_volume_limits, args.volume_binding, args.volume_zone)
    if not switches.any:
        return Predicates(args, kubestate.shared(context))
    if args.volume_shape:
        context.warn(
            "volumebinding.shape: storage capacity scoring is not done here "
            "(kube-scheduler's StorageCapacityScoring gate is off by default); ignored"
        )
    assumed = shared_assumptions(context)
    binder = VolumeBinder(assumed, float(args.bind_timeout_seconds)) if switches.binding else None
    return VolumePredicates(args, kubestate.shared(context), VolumeFilters(switches, assumed), binder)
