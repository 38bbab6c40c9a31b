"""Extension points: one small interface each. A plugin subclasses `Plugin` and lists the points it
implements as bases, e.g. `class Gang(Plugin, JobReady, JobOrder): ...`; mypy checks the methods.
Plugins receive a read-only `SessionView` (never the session itself).

`PluginLists` holds, per point, the plugins implementing it tier by tier; the framework builds it
once from the configured tiers (each field names the conf flag that gates it), and the session has
one typed dispatcher per point that combines their answers as Volcano does (see `session.py`).
Adding a point touches two files: a Protocol and a field here, its dispatcher in the session. An
action from a plugins directory can also define its own Protocol and call `Session.implementing`.

Batch points (`Predicate`, `NodeOrder`) take an array of node rows and answer for all of them at
once, so that a decision over thousands of nodes is a few numpy operations.

After the node is chosen come kube-scheduler's points: `Reserve` (with its Unreserve), `PreBind`
and `Bind` (see `binding.py` for when each runs).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from runtimekit.model import GpuKind
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.info import JobInfo, QueueInfo, TaskInfo
from runtimekit.scheduler.framework.observe import ReportsQueues
from runtimekit.scheduler.framework.status import Status
from runtimekit.scheduler.framework.values import DeviceChoice, Mask, Rows, Scores, Verdict, Vote
from runtimekit.scheduler.framework.view import SessionView

__all__ = [
    "Binding",
    "DeviceChoice",
    "Mask",
    "Plugin",
    "PluginLists",
    "Rows",
    "Scores",
    "SessionView",
    "Verdict",
    "Vote",
    "Watches",
]
T = TypeVar("T")


class Named(Protocol):
    """Points whose failures are stamped with the plugin's name."""

    name: str


class Plugin:
    """Base of every plugin. `name` is the name it is registered and configured under; `flags` are
    the `enable...` flags its conf entry sets explicitly (the framework sets them after building it;
    e.g. `enableHierarchy`, which Volcano leaves off unless set). A plugin that honours
    `enableHierarchy` says so with `hierarchy = True`; for the others the conf gets a warning."""

    name: str = ""
    flags: Mapping[str, bool] = MappingProxyType({})
    hierarchy: bool = False

    def on_session_open(self, ssn: SessionView) -> None:
        """Called at the start of every session, in tier order."""

    def on_session_close(self, ssn: SessionView) -> None:
        """Called at the end of every session, in tier order."""


# -- ordering ----------------------------------------------------------------------------------
@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """<0: left first; >0: right first; 0: no opinion (the next plugin decides)."""


@runtime_checkable
class JobOrderKey(JobOrder, Protocol):
    """A job order that is also a sort key: when every job-order plugin has one, the session orders
    jobs by the tuple of keys (computed once per job per push) instead of calling each plugin per
    comparison."""

    def job_order_key(self, job: JobInfo) -> float:
        """A number ordering as `job_order` does: `job_order(left, right)` has the sign of
        `job_order_key(left) - job_order_key(right)` whenever both are asked."""


@runtime_checkable
class TaskOrder(Protocol):
    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """<0: left first; >0: right first; 0: no opinion."""


@runtime_checkable
class QueueOrder(Protocol):
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        """<0: left first; >0: right first; 0: no opinion."""


# -- validity and fit --------------------------------------------------------------------------
@runtime_checkable
class JobValid(Named, Protocol):
    def job_valid(self, job: JobInfo) -> Status:
        """Non-success skips the job in allocate and backfill (the message is reported)."""


@runtime_checkable
class PrePredicate(Named, Protocol):
    def pre_predicate(self, task: TaskInfo) -> Status:
        """Node-independent checks, once per task; non-success means no node can take it."""


@runtime_checkable
class Predicate(Named, Protocol):
    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        """Which of `rows` can take the task. Must not change session state."""


EVERY_ROW = "every row"  # a `RowLocalPredicate` key: the pod passes this predicate on every row


@runtime_checkable
class RowLocalPredicate(Predicate, Protocol):
    """A predicate whose verdict on a row, for some pods, depends on the pod and that row's content
    (its `NodeTable.version`) alone, within one session: no other pod's state. When every predicate
    plugin (but those the pod skips) says so for a pod, the session keeps which rows passed per pod
    signature and checks again only the rows whose version changed since (`fitmemo.py`)."""

    def predicate_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """None when this pod's verdicts are not row-local now; else a key such that two pods (of
        this session, or of a later one while the nodes' metadata and capacities are the same) with
        equal keys pass or fail alike on every row whose version is equal; `EVERY_ROW` when the pod
        passes on every row now (the session then does not ask the plugin about the rows it checks)."""


@runtime_checkable
class NodeOrder(Protocol):
    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        """A score per row (higher is better); the session sums every plugin's scores."""


@runtime_checkable
class RowLocalScores(NodeOrder, Protocol):
    """A node order whose score of a row, for some pods, depends on the pod and that row's content
    (its `NodeTable.version`) alone: nothing normalised over the rows scored, no other pod's state.
    When every node-order plugin says so for a pod, the session keeps the summed scores per pod
    signature (the plugins' keys) and rescores only the rows whose version changed since
    (`scorememo.py`); the scores are the same bits as a full call's."""

    def row_local_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """None when this pod's scores are not row-local; else a key such that two pods (of this
        session) with equal keys get equal scores on every row whose version is equal. Called once
        per pod scored, before `node_order`: a plugin that learns from the pods it scores learns here
        too (each pod once), as `node_order` would."""


@runtime_checkable
class KeepsRowScores(RowLocalScores, Protocol):
    """A row-local node order that keeps its own scores per row version for every pod it declares
    row-local. As a session's only node-order plugin it is called directly: the session's memo
    would keep the same scores a second time, at a cost per pod (gpushare with packfrag at 5,000
    nodes: about 5 % of a decision). Beside other node-order plugins the memo keeps their sum. (A
    method, not a flag: `isinstance` of a protocol with data members walks it on every session.)"""

    def keeps_row_scores(self) -> bool:
        """Whether this plugin keeps its scores per row version itself."""


@runtime_checkable
class BestNode(Protocol):
    def best_node(self, task: TaskInfo, rows: Rows, scores: Scores) -> int | None:
        """Override the choice of node: a row from `rows`, or None for no opinion."""


@runtime_checkable
class DeviceAllocate(Named, Protocol):
    def allocate_devices(self, task: TaskInfo, row: int, ssn: SessionView) -> DeviceChoice | Status | None:
        """The devices the task takes on node `row`: a choice, a failure Status, or None when the
        task asks for nothing this plugin manages. The first plugin that answers owns the task."""


@runtime_checkable
class DeviceKinds(Protocol):
    """Which kinds of GPU request a `DeviceAllocate` plugin allocates (whole GPUs, shares, MIG
    slices). Read once by the conf check (`check.py`) to warn when a kind has no allocator; a
    DeviceAllocate plugin that does not say is taken to allocate every kind."""

    device_kinds: frozenset[GpuKind]


# -- after the node is chosen (kube-scheduler's Reserve, PreBind and Bind) ---------------------
@runtime_checkable
class Reserve(Named, Protocol):
    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        """Hold what this plugin keeps for the task, now placed on `task.node` with `choice` (the
        plugin's own state: the statement books the node table). Non-success fails the placement,
        and every Reserve plugin's `unreserve` is called."""

    def unreserve(self, task: TaskInfo) -> None:
        """Give back what `reserve` held for the task. Idempotent: called on any failure after
        Reserve (a discarded statement, a failed PreBind or bind, a session that ends with the
        task unbound), possibly on a binder thread, possibly for a task never reserved."""


@runtime_checkable
class PreBind(Named, Protocol):
    def pre_bind(self, binding: Binding) -> Status:
        """Prepare the binding before it is posted (e.g. write the device assignment with
        `binding.assign`). Runs outside the session, on a binder thread in a live scheduler;
        non-success fails the bind (the task is unreserved and retried)."""


@runtime_checkable
class Bind(Named, Protocol):
    def bind(self, binding: Binding) -> Status:
        """Bind the pod to `binding.node`: SKIP when it is not this plugin's to bind (the next
        plugin, and at last the cache's own binder, binds it); success when bound; else failed."""


# -- jobs and gangs ----------------------------------------------------------------------------
@runtime_checkable
class JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool:
        """True when the job may be committed (every plugin must agree)."""


@runtime_checkable
class JobPipelined(Protocol):
    def job_pipelined(self, job: JobInfo) -> Vote:
        """Whether to keep an unready job's allocations for this session."""


@runtime_checkable
class JobEnqueueable(Protocol):
    def job_enqueueable(self, job: JobInfo) -> Vote:
        """Whether a Pending job may move to Inqueue."""


@runtime_checkable
class JobEnqueued(Protocol):
    def job_enqueued(self, job: JobInfo) -> None:
        """Told when a job moved to Inqueue (e.g. to count its resources as promised)."""


@runtime_checkable
class JobStarving(Protocol):
    def job_starving(self, job: JobInfo) -> bool:
        """Whether a job still wants resources (preempt and reclaim act for starving jobs)."""


@runtime_checkable
class JobRelease(Protocol):
    def job_release(self, job: JobInfo) -> str | None:
        """Asked by allocate for a job it could not make ready: why to give back the members the job
        holds placed (they are evicted, so that a gang never sits on resources it cannot use), or
        None to let it keep them. Called once per job and session in which the job failed."""


# -- eviction ----------------------------------------------------------------------------------
@runtime_checkable
class Preemptable(Protocol):
    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Victims this plugin allows among `candidates`, or None to abstain."""


@runtime_checkable
class Reclaimable(Protocol):
    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        """Victims this plugin allows among `candidates` (other queues), or None to abstain."""


# -- queues ------------------------------------------------------------------------------------
@runtime_checkable
class Overused(Protocol):
    def overused(self, queue: QueueInfo) -> bool:
        """True when the queue already holds its share (any plugin saying so is enough)."""


@runtime_checkable
class Allocatable(Protocol):
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether the queue may take this task now (every plugin must agree)."""


@runtime_checkable
class Preemptive(Protocol):
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether the queue may reclaim for this task (every plugin must agree)."""


@runtime_checkable
class VictimQueueOrder(Protocol):
    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """Of victims in two different queues, which go first for a task of `preemptor`'s queue:
        negative `left`, positive `right`, 0 no opinion (the next plugin's, else the victims' own
        order: priority, then the newest first)."""


# -- events ------------------------------------------------------------------------------------
@runtime_checkable
class EventHandler(Protocol):
    def on_allocate(self, task: TaskInfo) -> None:
        """A task took resources in the session (allocate or pipeline, or an undone evict)."""

    def on_deallocate(self, task: TaskInfo) -> None:
        """A task gave resources back in the session (evict, or an undone allocate)."""


# -- what a plugin reads of the cluster -------------------------------------------------------
@runtime_checkable
class Watches(Protocol):
    """The kinds of cluster policy object a plugin reads besides nodes, pods and Volcano's kinds
    ("poddisruptionbudgets", "resourcequotas"): the live scheduler watches them while the plugin is
    configured (kube-scheduler's `EnqueueExtensions.EventsToRegister`)."""

    watches: tuple[str, ...]


@dataclass(frozen=True)
class Tiered(Generic[T]):
    """The plugins of one extension point: per tier in configured order, and all of them in order."""

    tiers: tuple[tuple[T, ...], ...] = ()
    flat: tuple[T, ...] = ()

    @classmethod
    def of(cls, tiers: Sequence[Sequence[T]]) -> Tiered[T]:
        return cls(tuple(tuple(tier) for tier in tiers), tuple(p for tier in tiers for p in tier))


def _gate(interface: type[Any], flag: str | None) -> dict[str, object]:
    """A PluginLists field's metadata: the interface its plugins implement, the conf flag that gates it."""
    return {"interface": interface, "flag": flag}


class Configured(Protocol):
    """A configured plugin: its conf entry says which of its points are enabled."""

    def enabled(self, flag: str) -> bool: ...


@dataclass(frozen=True)
class PluginLists:
    """Every extension point's plugins, built once per framework (`build`)."""

    job_order: Tiered[JobOrder] = field(default_factory=Tiered, metadata=_gate(JobOrder, "enableJobOrder"))
    task_order: Tiered[TaskOrder] = field(default_factory=Tiered, metadata=_gate(TaskOrder, "enableTaskOrder"))
    queue_order: Tiered[QueueOrder] = field(default_factory=Tiered, metadata=_gate(QueueOrder, "enableQueueOrder"))
    job_valid: Tiered[JobValid] = field(default_factory=Tiered, metadata=_gate(JobValid, None))
    pre_predicate: Tiered[PrePredicate] = field(default_factory=Tiered, metadata=_gate(PrePredicate, "enablePredicate"))
    predicate: Tiered[Predicate] = field(default_factory=Tiered, metadata=_gate(Predicate, "enablePredicate"))
    node_order: Tiered[NodeOrder] = field(default_factory=Tiered, metadata=_gate(NodeOrder, "enableNodeOrder"))
    best_node: Tiered[BestNode] = field(default_factory=Tiered, metadata=_gate(BestNode, "enableBestNode"))
    allocate_devices: Tiered[DeviceAllocate] = field(
        default_factory=Tiered, metadata=_gate(DeviceAllocate, "enableDevice")
    )
    reserve: Tiered[Reserve] = field(default_factory=Tiered, metadata=_gate(Reserve, None))
    pre_bind: Tiered[PreBind] = field(default_factory=Tiered, metadata=_gate(PreBind, None))
    bind: Tiered[Bind] = field(default_factory=Tiered, metadata=_gate(Bind, None))
    job_ready: Tiered[JobReady] = field(default_factory=Tiered, metadata=_gate(JobReady, "enableJobReady"))
    job_pipelined: Tiered[JobPipelined] = field(
        default_factory=Tiered, metadata=_gate(JobPipelined, "enableJobPipelined")
    )
    job_enqueueable: Tiered[JobEnqueueable] = field(
        default_factory=Tiered, metadata=_gate(JobEnqueueable, "enableJobEnqueued")
    )
    job_enqueued: Tiered[JobEnqueued] = field(default_factory=Tiered, metadata=_gate(JobEnqueued, "enableJobEnqueued"))
    job_starving: Tiered[JobStarving] = field(default_factory=Tiered, metadata=_gate(JobStarving, "enableJobStarving"))
    job_release: Tiered[JobRelease] = field(default_factory=Tiered, metadata=_gate(JobRelease, None))
    preemptable: Tiered[Preemptable] = field(default_factory=Tiered, metadata=_gate(Preemptable, "enablePreemptable"))
    reclaimable: Tiered[Reclaimable] = field(default_factory=Tiered, metadata=_gate(Reclaimable, "enableReclaimable"))
    overused: Tiered[Overused] = field(default_factory=Tiered, metadata=_gate(Overused, "enabledOverused"))
    allocatable: Tiered[Allocatable] = field(default_factory=Tiered, metadata=_gate(Allocatable, "enabledAllocatable"))
    preemptive: Tiered[Preemptive] = field(default_factory=Tiered, metadata=_gate(Preemptive, "enablePreemptive"))
    victim_queue_order: Tiered[VictimQueueOrder] = field(default_factory=Tiered, metadata=_gate(VictimQueueOrder, None))
    event_handler: Tiered[EventHandler] = field(default_factory=Tiered, metadata=_gate(EventHandler, None))
    queue_reports: Tiered[ReportsQueues] = field(default_factory=Tiered, metadata=_gate(ReportsQueues, None))
    watches: Tiered[Watches] = field(default_factory=Tiered, metadata=_gate(Watches, None))
    every: Tiered[Plugin] = field(default_factory=Tiered)  # every plugin, whatever it implements

    @classmethod
    def build(cls, tiers: Sequence[Sequence[tuple[Configured, Plugin]]]) -> PluginLists:
        """Sort configured plugins into the points they implement and their conf enables."""
        lists: dict[str, Tiered[Any]] = {}
        for f in fields(cls):
            interface, flag = f.metadata.get("interface"), f.metadata.get("flag")
            if interface is None:
                continue
            lists[f.name] = Tiered.of(
                [
                    [p for option, p in tier if isinstance(p, interface) and (flag is None or option.enabled(flag))]
                    for tier in tiers
                ]
            )
        return cls(**lists, every=Tiered.of([[p for _, p in tier] for tier in tiers]))

    # An `isinstance` of a protocol costs tens of microseconds, and a replay opens a session per pod:
    # what the sessions ask of the plugins' kinds is worked out once per framework.
    @cached_property
    def row_local_scorers(self) -> list[RowLocalScores] | None:
        """The node-order plugins, when every one of them can declare a pod's scores row-local
        (`RowLocalScores`), unless the only one keeps its scores per row itself (`KeepsRowScores`);
        else None (the session's score memo is not used)."""
        scorers = self.node_order.flat
        row_local = [p for p in scorers if isinstance(p, RowLocalScores)]
        if not row_local or len(row_local) != len(scorers):
            return None
        alone = len(scorers) == 1 and isinstance(scorers[0], KeepsRowScores) and scorers[0].keeps_row_scores()
        return None if alone else row_local

    @cached_property
    def row_local_checks(self) -> list[RowLocalPredicate] | None:
        """The predicate plugins, when every one of them can declare a pod's verdicts row-local
        (`RowLocalPredicate`); else None (the session's fit memo is not used)."""
        checks = self.predicate.flat
        fit_local = [p for p in checks if isinstance(p, RowLocalPredicate)]
        return fit_local if len(fit_local) == len(checks) else None
