"""Extension points: one small interface each. A plugin subclasses `Plugin` and lists the points it
implements as bases, e.g. `class Gang(Plugin, JobReady, JobOrder): ...`; mypy checks the methods.

The framework sorts plugins into per-point lists once, when it is built (`POINTS` says which conf
flag gates each point), and the session combines them across tiers as Volcano does (see
`session.py`). A new point is a Protocol here plus its dispatcher in the session; an action from a
plugins directory can also define its own Protocol and call `Session.implementing(...)`.

Batch points (`Predicate`, `NodeOrder`) take an array of node rows and answer for all of them at
once, so that a decision over thousands of nodes is a few numpy operations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from runtimekit.model import Slot
from runtimekit.scheduler.framework.status import Status

if TYPE_CHECKING:
    from runtimekit.scheduler.framework.info import JobInfo, QueueInfo, TaskInfo
    from runtimekit.scheduler.framework.session import Session

Rows = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Scores = npt.NDArray[np.float64]


class Vote(IntEnum):
    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


class Plugin:
    """Base of every plugin. `name` is the name it is registered and configured under."""

    name: str = ""

    def on_session_open(self, ssn: Session) -> None:
        """Called at the start of every session, in tier order."""

    def on_session_close(self, ssn: Session) -> None:
        """Called at the end of every session, in tier order."""


@dataclass
class Verdict:
    """A batch predicate's answer: which of the given rows pass, and why the others do not.

    `reasons` pairs a reason with the rows (a mask over the given rows) it explains, either as a
    list or as a function returning it (called only when someone reads the reasons); a failing
    row that no reason covers is reported as the plugin's generic rejection. `passed` is the
    verdict's own: the plugin does not change it afterwards (reasons are counted from it later).
    """

    passed: Mask
    reasons: list[tuple[str, Mask]] | Callable[[], list[tuple[str, Mask]]] = field(default_factory=list)

    @classmethod
    def all(cls, count: int) -> Verdict:
        return cls(np.ones(count, np.bool_))


@dataclass(frozen=True)
class DeviceChoice:
    """Which devices inside the chosen node each container of a task takes."""

    containers: tuple[tuple[str, tuple[Slot, ...]], ...] = ()
    policy: str = ""

    @property
    def slots(self) -> tuple[Slot, ...]:
        if len(self.containers) == 1:
            return self.containers[0][1]
        return tuple(slot for _, slots in self.containers for slot in slots)


# -- ordering ----------------------------------------------------------------------------------
@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """<0: left first; >0: right first; 0: no opinion (the next plugin decides)."""


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
class JobValid(Protocol):
    def job_valid(self, job: JobInfo) -> Status:
        """Non-success skips the job in allocate and backfill (the message is reported)."""


@runtime_checkable
class PrePredicate(Protocol):
    def pre_predicate(self, task: TaskInfo) -> Status:
        """Node-independent checks, once per task; non-success means no node can take it."""


@runtime_checkable
class Predicate(Protocol):
    def predicate(self, task: TaskInfo, rows: Rows, ssn: Session) -> Verdict:
        """Which of `rows` can take the task. Must not change session state."""


@runtime_checkable
class NodeOrder(Protocol):
    def node_order(self, task: TaskInfo, rows: Rows, ssn: Session) -> Scores:
        """A score per row (higher is better); the session sums every plugin's scores."""


@runtime_checkable
class BestNode(Protocol):
    def best_node(self, task: TaskInfo, rows: Rows, scores: Scores) -> int | None:
        """Override the choice of node: a row from `rows`, or None for no opinion."""


@runtime_checkable
class DeviceAllocate(Protocol):
    def allocate_devices(self, task: TaskInfo, row: int, ssn: Session) -> DeviceChoice | Status | None:
        """The devices the task takes on node `row`: a choice, a failure Status, or None when the
        task asks for nothing this plugin manages. The first plugin that answers owns the task."""


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


# -- events ------------------------------------------------------------------------------------
@runtime_checkable
class EventHandler(Protocol):
    def on_allocate(self, task: TaskInfo) -> None:
        """A task took resources in the session (allocate or pipeline, or an undone evict)."""

    def on_deallocate(self, task: TaskInfo) -> None:
        """A task gave resources back in the session (evict, or an undone allocate)."""


@dataclass(frozen=True)
class Point:
    name: str
    interface: type[Any]
    flag: str | None  # the PluginOption flag that gates it; None: always on


POINTS: tuple[Point, ...] = (
    Point("job_order", JobOrder, "enableJobOrder"),
    Point("task_order", TaskOrder, "enableTaskOrder"),
    Point("queue_order", QueueOrder, "enableQueueOrder"),
    Point("job_valid", JobValid, None),
    Point("pre_predicate", PrePredicate, "enablePredicate"),
    Point("predicate", Predicate, "enablePredicate"),
    Point("node_order", NodeOrder, "enableNodeOrder"),
    Point("best_node", BestNode, "enableBestNode"),
    Point("allocate_devices", DeviceAllocate, "enableDevice"),
    Point("job_ready", JobReady, "enableJobReady"),
    Point("job_pipelined", JobPipelined, "enableJobPipelined"),
    Point("job_enqueueable", JobEnqueueable, "enableJobEnqueued"),
    Point("job_enqueued", JobEnqueued, "enableJobEnqueued"),
    Point("job_starving", JobStarving, "enableJobStarving"),
    Point("preemptable", Preemptable, "enablePreemptable"),
    Point("reclaimable", Reclaimable, "enableReclaimable"),
    Point("overused", Overused, "enabledOverused"),
    Point("allocatable", Allocatable, "enabledAllocatable"),
    Point("preemptive", Preemptive, "enablePreemptive"),
    Point("event_handler", EventHandler, None),
)
