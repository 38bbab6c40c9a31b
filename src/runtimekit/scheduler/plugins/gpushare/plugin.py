"""The `gpushare` plugin: time-division GPU sharing (core percent + memory on one GPU), whole GPUs
and multi-GPU pods, with a choice of placement policies.

Implements: PrePredicate (request sanity), Predicate (GPU fit and the allowed GPU models, over all
nodes at once; for a GPU-less pod, the CPU its policy keeps for GPUs, see `cpuReserve`), NodeOrder
(the policy's score x weight), DeviceAllocate (the GPUs inside the chosen node), Reserve (holds
those GPUs for the pod until it is bound or given up) and PreBind
(writes the held GPUs into the binding's assignment). A pod may pick another policy with the
protocol's `annotations.policy` annotation, or a node policy and a GPU policy apart (`podpolicy`); a
pod's GPU constraints (models, UUIDs) are checked on a copy of the table holding only the GPUs it
may use (`selection`).
A gpu-memory request counts in the unit of the node it is checked against (`units`). Under a protocol
with a split count (`resources.gpuReplicas` above 1: HAMi's, Volcano vGPU's) their per-card rules apply
(`fit`).

Arguments (Volcano style, the `gpushare.` prefix optional):
    gpushare.policy: packfrag     # packfrag, fgd, random, dotprod, gpuclustering, gpupacking, bestfit, binpack, spread
    gpushare.weight: 1            # multiplies the policy's 0-100 score
    gpushare.workload: ""         # FGD target workload: a pod-list CSV; empty: learn from arriving pods
    gpushare.allowPodPolicy: true # honour the per-pod policy annotation
    gpushare.cpuReserve: 1.0      # packfrag: once CPU is the scarce resource, a GPU-less pod may not take a
                                  # GPU node's CPU below this x the learned GPU pods' CPU per GPU milli x
                                  # its free GPU milli; it waits ("CPU kept for the node's free GPUs"); 0: off
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtimekit.model import ContainerGpuRequest, GpuKind, GpuRequest, NodeTable, PodKey, PodRequest, Slot
from runtimekit.model.selector import IN_USE, MODELS, UUIDS
from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, parse_arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    EVERY_ROW,
    DeviceAllocate,
    DeviceChoice,
    DeviceKinds,
    KeepsRowScores,
    Mask,
    Plugin,
    PreBind,
    PrePredicate,
    Reserve,
    RowLocalPredicate,
    Rows,
    Scores,
    Verdict,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, unresolvable, unschedulable
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import Held, HoldsDevices
from runtimekit.scheduler.plugins.gpushare.fit import (
    REASON_MODEL,
    fit_rows,
    fitting_gpus,
    hopeless_rows,
    sequential_fit,
    slots_for,
    summary_fit,
)
from runtimekit.scheduler.plugins.gpushare.podpolicy import defaults, is_split, resolve
from runtimekit.scheduler.plugins.gpushare.policies import (
    DEFAULT_POLICY,
    POLICIES,
    KeepsCpu,
    Learner,
    LearnsAt,
    PackFragPolicy,
    PodShape,
    PodType,
    Policy,
    PolicyContext,
    RowLocalPolicy,
    TakesWorkload,
    TargetWorkload,
)
from runtimekit.scheduler.plugins.gpushare.policies.packfrag import CPU_RESERVE
from runtimekit.scheduler.plugins.gpushare.selection import RestrictedView, restrict
from runtimekit.scheduler.plugins.gpushare.units import UNREADABLE, NodeUnits, in_unit, uses_units

NAME = "gpushare"
# a pod asking no GPU, on a node whose free CPU its policy keeps for the node's free GPUs (packfrag)
REASON_CPU_KEPT = "CPU kept for the node's free GPUs"
SHARED_KINDS = frozenset({GpuKind.SHARE, GpuKind.WHOLE})


@dataclass(frozen=True)
class GpuShareArgs:
    policy: str = DEFAULT_POLICY
    weight: float = 1.0
    workload: str = ""
    allow_pod_policy: bool = True
    learn_every: int = 256
    # packfrag: CPU a GPU node keeps from pods asking no GPU, per free GPU milli, in the learned GPU
    # pods' CPU per GPU milli, once CPU is the cluster's scarce resource (0: keep none)
    cpu_reserve: float = CPU_RESERVE

    def __post_init__(self) -> None:
        for name in set(defaults(self.policy)):
            if name not in POLICIES:
                known = ", ".join(POLICIES)
                raise ArgumentError(
                    f"{NAME}: unknown policy {self.policy!r}; known: {known} (or <node policy>/<GPU policy>)"
                )
        if self.weight < 0:
            raise ArgumentError(f"{NAME}: weight must not be negative, got {self.weight}")
        if self.learn_every < 1:
            raise ArgumentError(f"{NAME}: learnEvery must be at least 1")
        if self.cpu_reserve < 0:
            raise ArgumentError(f"{NAME}: cpuReserve must not be negative, got {self.cpu_reserve}")


class GpuSharePlugin(
    HoldsDevices,
    Plugin,
    PrePredicate,
    RowLocalPredicate,
    KeepsRowScores,
    DeviceAllocate,
    DeviceKinds,
    Reserve,
    PreBind,
):
    name = NAME
    device_kinds: frozenset[GpuKind] = SHARED_KINDS

    def __init__(
        self,
        args: GpuShareArgs,
        context: BuildContext,
        workload: TargetWorkload | None = None,
        kinds: frozenset[GpuKind] = SHARED_KINDS,
    ) -> None:
        self.args = args
        self.device_kinds = kinds  # the kinds of GPU request this plugin places (MIG slices are mig's)
        self.rng = context.rng
        self.policies: dict[str, Policy] = {name: make() for name, make in POLICIES.items()}
        self._splits: dict[str, Policy] = {}  # split policies built, by the value asked
        if args.cpu_reserve != CPU_RESERVE:
            self.policies[PackFragPolicy.name] = PackFragPolicy(cpu_reserve=args.cpu_reserve)
        for part in set(defaults(args.policy)):
            configured = self.policies[part]
            if isinstance(configured, PackFragPolicy):  # its LP solver's import, at start-up, not mid-decision
                configured.load_solver()
        # per policy (by id, with the policy to tell a reused id): the policy as a RowLocalPolicy, or None
        self._row_local_policies: dict[int, tuple[Policy, RowLocalPolicy | None]] = {}
        self._cpu_keepers: dict[int, tuple[Policy, KeepsCpu | None]] = {}  # the same, as a `KeepsCpu`
        self._filter_learners, self._score_learners = self._learners()
        if workload is not None:
            self.set_workload(workload)
        self._pod_policy_key = context.protocol.annotations.policy
        self._split_keys = (context.protocol.annotations.node_policy, context.protocol.annotations.gpu_policy)
        self._observed: set[str] = set()  # pods the SCORE learners were told of
        self._learned: set[str] = set()  # pods the FILTER learners were told of
        self._needs: dict[int, _Need] = {}
        self._ctx: PolicyContext | None = None
        self.units = NodeUnits(context.protocol.labels.memory_unit, context.protocol.memory_unit_mib)
        # memory kubelet never sees (resources.memoryAdvertised: false) is MiB in the protocol's unit on
        # every node, whatever unit a device plugin publishes
        self._node_units = context.protocol.resources.memory_advertised
        self.split = context.protocol.resources.gpu_replicas  # shares per GPU, as kubelet has its devices
        # GPUs held for placed pods until PreBind writes them (or Unreserve gives them up); written
        # by the scheduling thread, read by binder threads (single dict operations only)
        self._held: dict[PodKey, Held] = {}
        self._last_answer: DeviceChoice | None = None  # the latest choice allocate_devices returned

    def need(self, request: PodRequest) -> _Need:
        """What this plugin reads of a request, worked out once per request object (a pod's request
        is read by the predicate, the score and the device choice, and trace replay shares requests
        between pods). The request is kept in the entry, so its id cannot be reused while it lives."""
        found = self._needs.get(id(request))
        if found is not None and found.request is request:
            return found
        if len(self._needs) >= 4096:
            self._needs.clear()
        containers = tuple(c for c in request.gpus if c.gpu.kind in self.device_kinds)
        gpus = tuple(c.gpu for c in containers)
        need = self._needs[id(request)] = _Need(
            request,
            PodShape.of(request),
            containers,
            gpus,
            any(uses_units(g) for g in gpus),
            frozenset(c.container for c in containers),
        )
        return need

    def shape(self, request: PodRequest) -> PodShape:
        """`PodShape.of(request)`, once per request object (see `need`)."""
        return self.need(request).shape

    def _context(self, table: NodeTable) -> PolicyContext:
        """The policies' view of a session's table (one per table, not one per call)."""
        if self._ctx is None or self._ctx.table is not table:
            self._ctx = PolicyContext(table, self.rng)
        return self._ctx

    def _learners(self) -> tuple[dict[str, Learner], dict[str, Learner]]:
        """The learning policies (`Learner`) by name, those that learn at filtering and those that learn
        at scoring: sorted once, and again when `set_workload` replaces policies."""
        learners: dict[str, Learner] = {name: p for name, p in self.policies.items() if isinstance(p, Learner)}
        at = {kind: {name: p for name, p in learners.items() if p.learns_at is kind} for kind in LearnsAt}
        return at[LearnsAt.FILTER], at[LearnsAt.SCORE]

    def set_workload(self, workload: TargetWorkload) -> None:
        """Give the policies that take one (`TakesWorkload`: fgd) this target workload; they learn
        none from the pods they see (the others still do)."""
        for name, policy in list(self.policies.items()):
            if isinstance(policy, TakesWorkload):
                self.policies[name] = policy.with_workload(workload)
        self._filter_learners, self._score_learners = self._learners()
        self._row_local_policies.clear()  # which policies learn at scoring may have changed
        self._cpu_keepers.clear()
        self._splits.clear()  # they hold the policies replaced

    def _default(self) -> Policy:
        """The plugin's policy (`gpushare.policy`), a split one built from the current policies."""
        if not is_split(self.args.policy):
            return self.policies[self.args.policy]
        return self._split(self.args.policy)

    def policy_for(self, task: TaskInfo) -> Policy:
        if self.args.allow_pod_policy and task.policy in self.policies:
            return self.policies[task.policy]
        if self.args.allow_pod_policy and is_split(task.policy):
            return self._split(task.policy)
        return self._default()

    def _split(self, asked: str) -> Policy:
        if len(self._splits) > 1024:
            self._splits.clear()
        return resolve(asked, self.policies, self.args.policy, self._split_keys, self._splits)

    # -- PrePredicate ----------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> Status:
        if (
            task.policy
            and not is_split(task.policy)
            and task.policy not in self.policies
            and self.args.allow_pod_policy
        ):
            return unresolvable(f"unknown placement policy {task.policy!r} in annotation {self._pod_policy_key}")
        learner = self._filter_learners.get(self.policy_for(task).name)
        if learner is not None and task.key not in self._learned:
            if len(self._learned) > 100_000:
                self._learned.clear()
            self._learned.add(task.key)  # every pod counts once, feasible or not, however often it is retried
            learner.learn(_pod_type(task, self.shape(task.request)))
        if self.need(task.request).gpus:
            return SUCCESS
        return SUCCESS if self._keeps_cpu(task) else SKIP

    def _keeps_cpu(self, task: TaskInfo) -> bool:
        """Whether the pod asks no device and its policy may keep GPU nodes' CPU from it now."""
        keeper = self._cpu_keeper(task)
        return keeper is not None and keeper.keeps_cpu()

    def _cpu_keeper(self, task: TaskInfo) -> KeepsCpu | None:
        """The pod's policy when it keeps GPU nodes' CPU from pods asking no GPU (`KeepsCpu`) and the
        pod asks for no device at all (no GPU of any kind, no resource claim); else None."""
        if task.request.gpus or (task.pod is not None and (task.pod.get("spec") or {}).get("resourceClaims")):
            return None
        policy = self.policy_for(task)
        known = self._cpu_keepers.get(id(policy))
        if known is None or known[0] is not policy:  # an isinstance of a Protocol costs: once per policy
            known = self._cpu_keepers[id(policy)] = (policy, policy if isinstance(policy, KeepsCpu) else None)
        return known[1]

    # -- Predicate -------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        need = self.need(task.request)
        requests = need.gpus
        if not requests:
            return self._predicate_no_gpu(task, rows, ssn)
        if task.gpu_select is not None and not isinstance(ssn, RestrictedView):
            return self._predicate_selected(task, rows, ssn)
        if self._node_units and need.in_units and not self.units.uniform(ssn.snapshot):
            units = self.units.of(ssn.snapshot)[rows]
            if (units != self.units.default_mib).any():
                return self._predicate_per_unit(task, rows, ssn, requests, units)
        return self._predicate(task, rows, ssn, requests)

    def predicate_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """Row-local (`RowLocalPredicate`): the GPU fit reads the row's GPUs and GPU model alone. The
        pods that choose GPUs by model or UUID, those whose memory counts in units that differ
        between nodes, and GPU-less pods whose policy keeps CPU from them now keep the full call."""
        need = self.need(task.request)
        if not need.gpus:  # the CPU its policy keeps reads the learned workload and other rows
            return None if self._keeps_cpu(task) else EVERY_ROW
        if task.gpu_select is not None or (self._node_units and need.in_units and not self.units.uniform(ssn.snapshot)):
            return None
        if len(need.gpus) == 1 and task.gpu_models is None and summary_fit(need.gpus[0], self.split):
            return None  # the fit reads a per-node summary: over every row it costs less than the memo
        return (need.gpus, task.gpu_models)

    def _predicate_no_gpu(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        """A pod asking no GPU: every row, but those whose CPU its policy keeps for their free GPUs."""
        keeper = self._cpu_keeper(task)
        kept = None if keeper is None else keeper.cpu_kept(self._context(ssn.table), self.shape(task.request), rows)
        if kept is None or not kept.any():
            return Verdict.all(rows.size)
        return Verdict(~kept, [(REASON_CPU_KEPT, kept)])

    def _predicate_per_unit(
        self, task: TaskInfo, rows: Rows, ssn: SessionView, requests: tuple[GpuRequest, ...], units: Rows
    ) -> Verdict:
        """The predicate over rows of several memory units: each group of rows with its unit's requests.
        A node whose unit label is unreadable fails, and no eviction helps it."""
        passed = np.zeros(rows.size, np.bool_)
        parts: list[tuple[Rows, Verdict]] = []
        for unit in np.unique(units).tolist():
            where = np.flatnonzero(units == unit)
            if unit == UNREADABLE:
                why = f"node label {self.units.label} is not a memory unit (such as 1Gi or 512Mi)"
                every = np.ones(where.size, np.bool_)
                parts.append((where, Verdict(np.zeros(where.size, np.bool_), [(why, every)], every)))
                continue
            scaled = tuple(in_unit(r, self.units.default_mib, unit) for r in requests)
            verdict = self._predicate(task, rows[where], ssn, scaled)
            passed[where] = verdict.passed
            parts.append((where, verdict))

        def spread(mask: Mask, where: Rows) -> Mask:
            full = np.zeros(rows.size, np.bool_)
            full[where] = mask
            return full

        def explain() -> list[tuple[str, Mask]]:
            return [
                (why, spread(mask, where))
                for where, verdict in parts
                for why, mask in (verdict.reasons() if callable(verdict.reasons) else verdict.reasons)
            ]

        def hopeless() -> Mask:
            out = np.zeros(rows.size, np.bool_)
            for where, verdict in parts:
                found = verdict.unresolvable() if callable(verdict.unresolvable) else verdict.unresolvable
                if found is not None:
                    out |= spread(found, where)
            return out

        return Verdict(passed, explain, unresolvable=hopeless)

    def _predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView, requests: tuple[GpuRequest, ...]) -> Verdict:
        table = ssn.table

        def hopeless() -> Mask:
            out = hopeless_rows(table, rows, requests[0])
            for req in requests[1:]:
                out = out | hopeless_rows(table, rows, req)
            if task.gpu_models is not None:
                out |= ~ssn.snapshot.model_mask(task.gpu_models)[rows]
            return out

        if len(requests) == 1 and task.gpu_models is None:  # the usual case: one GPU container, any model
            return Verdict(*fit_rows(table, rows, requests[0], self.split), unresolvable=hopeless)
        checks: list[tuple[np.ndarray, Any]] = []
        if task.gpu_models is not None:
            model_ok = ssn.snapshot.model_mask(task.gpu_models)[rows]
            checks.append((model_ok, [(REASON_MODEL, ~model_ok)]))
        for req in requests:
            checks.append(fit_rows(ssn.table, rows, req, self.split))
        passed = checks[0][0] if len(checks) == 1 else np.logical_and.reduce([c[0] for c in checks])
        if len(requests) > 1 and passed.any():
            together = np.array(
                [
                    sequential_fit(ssn.table, int(r), requests, self.split) if p else False
                    for r, p in zip(rows, passed, strict=True)
                ]
            )
            checks.append((together, [("GPUs fit each container but not all together", ~together)]))
            passed = passed & together

        def explain() -> list[tuple[str, np.ndarray]]:
            out: list[tuple[str, np.ndarray]] = []
            for _, why in checks:
                out.extend(why() if callable(why) else why)
            return out

        return Verdict(passed, explain, unresolvable=hopeless)

    def _predicate_selected(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        """The predicate over only the GPUs the pod may use; nodes with none fail for that reason."""
        assert task.gpu_select is not None
        select = task.gpu_select
        restriction = restrict(ssn.table, select, rows)
        inner = self.predicate(task, rows, RestrictedView(ssn, restriction.table))
        no_model, no_uuid = restriction.no_model[rows], restriction.no_uuid[rows]
        hopeless_out = no_model | no_uuid
        in_use = restriction.in_use[rows]  # evictions may free them
        ruled_out = hopeless_out | in_use

        def explain() -> list[tuple[str, Mask]]:
            found = inner.reasons() if callable(inner.reasons) else inner.reasons
            out = [(select.reason(MODELS), no_model), (select.reason(UUIDS), no_uuid), (select.reason(IN_USE), in_use)]
            return out + [(why, mask & ~ruled_out) for why, mask in found]

        def hopeless() -> Mask:
            found = inner.unresolvable() if callable(inner.unresolvable) else inner.unresolvable
            return hopeless_out if found is None else hopeless_out | found

        return Verdict(inner.passed & ~ruled_out, explain, unresolvable=hopeless)

    # -- NodeOrder -------------------------------------------------------------------------
    def row_local_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """Row-local (`RowLocalScores`) when the pod's policy says its scores are (`RowLocalPolicy`)
        and does not learn at scoring (which `node_order` does once per pod)."""
        policy = self.policy_for(task)
        known = self._row_local_policies.get(id(policy))
        if known is None or known[0] is not policy:  # an isinstance of a Protocol costs: once per policy
            row_local = (
                policy if isinstance(policy, RowLocalPolicy) and policy.name not in self._score_learners else None
            )
            known = self._row_local_policies[id(policy)] = (policy, row_local)
        if known[1] is None:
            return None
        key = known[1].score_key(self._context(ssn.table), self.shape(task.request))
        return None if key is None else (policy, key)

    def keeps_row_scores(self) -> bool:
        """`KeepsRowScores`: the one row-local policy, packfrag, keeps its scores per shape and row
        version (`ShapeCache`)."""
        return True

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        shape = self.shape(task.request)
        policy = self.policy_for(task)
        learner = self._score_learners.get(policy.name)
        if learner is not None and task.key not in self._observed:
            if len(self._observed) > 100_000:
                self._observed.clear()
            self._observed.add(task.key)  # each pod counts once, however often it is retried
            learner.learn(_pod_type(task, shape))
        scores = policy.score(self._context(ssn.table), shape, rows)
        weighted = scores.astype(np.float64)
        if self.args.weight != 1.0:
            weighted *= self.args.weight
        return weighted

    # -- DeviceAllocate --------------------------------------------------------------------
    def allocate_devices(self, task: TaskInfo, row: int, ssn: SessionView) -> DeviceChoice | Status | None:
        need = self.need(task.request)
        requests, shape = need.containers, need.shape
        if not requests:
            return None
        if task.gpu_select is not None and not isinstance(ssn, RestrictedView):
            restriction = restrict(ssn.table, task.gpu_select, np.array([row], np.int64))
            return self.allocate_devices(task, row, RestrictedView(ssn, restriction.table))
        policy = self.policy_for(task)
        ctx = PolicyContext(ssn.table.copy(), self.rng) if len(requests) > 1 else self._context(ssn.table)
        unit = int(self.units.of(ssn.snapshot)[row]) if self._node_units and need.in_units else 0
        chosen: list[tuple[str, tuple[Slot, ...]]] = []
        for container in requests:
            gpu = in_unit(container.gpu, self.units.default_mib, unit) if unit else container.gpu
            fitting = fitting_gpus(ctx.table, row, gpu, self.split)
            if fitting.size < gpu.count:
                return unschedulable(f"container {container.container}: GPUs no longer fit on the chosen node")
            columns = policy.choose(ctx, shape, gpu, row, fitting)
            taken = slots_for(ctx.table, row, gpu, columns)
            chosen.append((container.container, taken))
            if len(requests) > 1:
                _take_scratch(ctx, row, taken)
        answer = self._last_answer = DeviceChoice(tuple(chosen), policy.name)
        return answer

    # -- Reserve and PreBind ---------------------------------------------------------------
    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        if choice is self._last_answer:  # the usual: the session took this plugin's answer as it was
            self.hold(task, choice.containers, choice.policy)
            return SUCCESS
        names = self.need(task.request).names
        if names:  # the choice merges other device plugins' answers: this plugin's containers only
            self.hold(task, tuple(c for c in choice.containers if c[0] in names), self.policy_for(task).name)
        return SUCCESS


@dataclass(frozen=True)
class _Need:
    """A request as the plugin reads it: its shape for the policies, its non-MIG GPU containers."""

    request: PodRequest
    shape: PodShape
    containers: tuple[ContainerGpuRequest, ...]
    gpus: tuple[GpuRequest, ...]  # the containers' requests, in order
    in_units: bool  # some container's memory is counted in gpu-memory units (which nodes may size apart)
    names: frozenset[str]  # the containers' names


def _take_scratch(ctx: PolicyContext, row: int, slots: tuple[Slot, ...]) -> None:
    for slot in slots:
        ctx.table.core_free[row, slot.gpu] -= slot.core_milli
        ctx.table.gmem_free[row, slot.gpu] -= slot.memory_mib
        ctx.table.holders[row, slot.gpu] += 1


def _pod_type(task: TaskInfo, shape: PodShape) -> PodType:
    models = "|".join(sorted(task.gpu_models)) if task.gpu_models else ""
    return PodType(shape.cpu_milli, shape.milli if shape.gpu else 0, shape.count, models if shape.gpu else "")


def workload_from_file(path: str) -> TargetWorkload:
    """FGD's target workload from a pod-list CSV in the openb format."""
    from runtimekit.model.trace import TraceError, read_pod_list

    try:
        pods = read_pod_list(path)
    except TraceError as exc:
        raise ArgumentError(f"{NAME}: workload: {exc}") from exc
    return TargetWorkload.from_types(
        PodType(p.cpu_milli, p.gpu_milli if p.num_gpu else 0, p.num_gpu, p.gpu_spec if p.num_gpu else "") for p in pods
    )


def build(arguments: Arguments, context: BuildContext, workload: TargetWorkload | None = None) -> GpuSharePlugin:
    """The plugin from its conf arguments; `workload`, when given, is FGD's target workload and
    `gpushare.workload` is not read (the simulator's, handed over by `scheduler/inprocess.py`)."""
    args = parse_arguments(GpuShareArgs, NAME, arguments)
    if workload is None and args.workload:
        workload = workload_from_file(args.workload)
    return GpuSharePlugin(args, context, workload)
