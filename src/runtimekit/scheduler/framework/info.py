"""What a scheduling session sees: tasks (pods), jobs (pod groups), queues, node metadata, and the
snapshot that bundles them with a copy of the node table.

Tasks and jobs are mutable inside a session (their status moves as statements run); the cache
hands every session its own copies, so nothing a session does leaks out before a commit.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NewType

import numpy as np

from runtimekit.model import NodeName, NodeTable, Placement, PodKey, PodRequest
from runtimekit.model.ledger import IntArray

JobKey = NewType("JobKey", str)
DEFAULT_QUEUE = "default"


class TaskStatus(Enum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


# Statuses that hold resources on a node.
OCCUPYING = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.RELEASING,
    }
)
# Statuses that count towards a gang's minMember (Volcano's ReadyTaskNum).
READY = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED}
)


@dataclass(frozen=True)
class Resources:
    """A resource vector for fairness and quotas: CPU milli, memory MiB, GPU milli."""

    cpu: int = 0
    memory: int = 0
    gpu: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu)

    def fits_in(self, other: Resources) -> bool:
        return self.cpu <= other.cpu and self.memory <= other.memory and self.gpu <= other.gpu

    def items(self) -> Iterator[tuple[str, int]]:
        yield from (("cpu", self.cpu), ("memory", self.memory), ("gpu", self.gpu))

    @classmethod
    def of(cls, request: PodRequest) -> Resources:
        return cls(request.cpu_milli, request.memory_mib, request.gpu_milli)


@dataclass
class TaskInfo:
    """One pod as the scheduler sees it."""

    key: PodKey
    namespace: str
    name: str
    job: JobKey
    request: PodRequest
    status: TaskStatus = TaskStatus.PENDING
    node: NodeName | None = None
    placement: Placement | None = None
    priority: int = 0
    created: float = 0.0
    policy: str = ""  # placement policy asked for by annotation ("" = the plugin's default)
    gpu_models: frozenset[str] | None = None  # allowed GPU models (None = any)
    invalid: str = ""  # why the request cannot be honoured ("" = valid)
    preemptable: bool = True
    pod: Mapping[str, Any] | None = None  # the manifest, for predicates; None in trace replay
    nominated: NodeName | None = None

    @property
    def resources(self) -> Resources:
        return Resources.of(self.request)

    def clone(self) -> TaskInfo:
        return copy.copy(self)


@dataclass
class JobInfo:
    """A pod group (a gang); a pod without a PodGroup is a job of one with minMember 1."""

    key: JobKey
    namespace: str
    name: str
    queue: str = DEFAULT_QUEUE
    min_member: int = 1
    priority: int = 0
    created: float = 0.0
    tasks: dict[PodKey, TaskInfo] = field(default_factory=dict)
    phase: str = "Inqueue"  # PodGroup phase: Pending, Inqueue, Running, Unknown, Completed
    min_resources: Resources | None = None
    has_podgroup: bool = False
    fit_errors: dict[PodKey, Any] = field(default_factory=dict)

    def add(self, task: TaskInfo) -> None:
        self.tasks[task.key] = task

    def tasks_in(self, *statuses: TaskStatus) -> list[TaskInfo]:
        wanted = set(statuses)
        return [t for t in self.tasks.values() if t.status in wanted]

    @property
    def pending(self) -> list[TaskInfo]:
        return self.tasks_in(TaskStatus.PENDING)

    def ready_count(self) -> int:
        return sum(1 for t in self.tasks.values() if t.status in READY)

    def waiting_count(self) -> int:
        return sum(1 for t in self.tasks.values() if t.status is TaskStatus.PIPELINED)

    def allocated(self) -> Resources:
        total = Resources()
        for task in self.tasks.values():
            if task.status in OCCUPYING:
                total = total + task.resources
        return total

    def requested(self) -> Resources:
        total = Resources()
        for task in self.tasks.values():
            total = total + task.resources
        return total

    def clone(self) -> JobInfo:
        other = copy.copy(self)
        other.tasks = {k: t.clone() for k, t in self.tasks.items()}
        other.fit_errors = {}
        return other


@dataclass
class QueueInfo:
    name: str
    weight: int = 1
    capability: Resources | None = None
    guarantee: Resources = field(default_factory=Resources)
    reclaimable: bool = True
    priority: int = 0
    state: str = "Open"

    def clone(self) -> QueueInfo:
        return copy.copy(self)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class NodeMeta:
    """What predicates need to know about a node besides its free resources."""

    name: NodeName
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpu_model: str = ""
    ready: bool = True


@dataclass
class Snapshot:
    """A session's private view of the cluster. `meta` and `rank` are aligned with table rows."""

    table: NodeTable
    meta: list[NodeMeta | None]
    jobs: dict[JobKey, JobInfo]
    queues: dict[str, QueueInfo]
    rank: IntArray  # tie-break order per row: the lowest rank wins among equal scores
    model_ids: IntArray  # per row, index into model_names (-1 for no GPU model)
    model_names: list[str]
    now: float = 0.0

    def tasks(self) -> Iterator[TaskInfo]:
        for job in self.jobs.values():
            yield from job.tasks.values()

    def model_mask(self, allowed: frozenset[str] | None) -> np.ndarray:
        """Rows whose GPU model is in `allowed` (all rows when allowed is None)."""
        if allowed is None:
            return np.ones(self.table.rows, np.bool_)
        ids = [i for i, name in enumerate(self.model_names) if name in allowed]
        return np.isin(self.model_ids[: self.table.rows], ids)
