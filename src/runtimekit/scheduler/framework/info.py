"""What a scheduling session sees: tasks (pods), jobs (pod groups), queues, node metadata, and the
snapshot that bundles them with a copy of the node table.

Tasks and jobs are mutable inside a session (their status moves as statements run); the cache
hands every session its own copies, so nothing a session does leaks out before a commit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any, NewType, TypeVar

import numpy as np

from runtimekit.kube.objects import Pod
from runtimekit.kube.semantics.nodeaffinity import required_matches, requirement_matches
from runtimekit.kube.semantics.tolerations import tolerates, untolerated
from runtimekit.model import GpuKind, GpuSelector, NodeName, NodeTable, Placement, PodKey, PodRequest
from runtimekit.model.ledger import IntArray
from runtimekit.model.scalars import Scalars, amount_of, combine, scalars_of
from runtimekit.scheduler.framework.policy import DisruptionBudget, NamespaceQuota
from runtimekit.scheduler.kubesem import nodeaffinity
from runtimekit.scheduler.kubesem import taints as kube_taints
from runtimekit.scheduler.kubesem.dra import EMPTY_DRA, DraCatalog
from runtimekit.scheduler.kubesem.draquota import DraLimit
from runtimekit.scheduler.kubesem.podbook import EMPTY as EMPTY_PODS
from runtimekit.scheduler.kubesem.podbook import PodSet
from runtimekit.scheduler.kubesem.pods import PodFactsMemo
from runtimekit.scheduler.kubesem.volumes import EMPTY_CATALOG, VolumeCatalog

JobKey = NewType("JobKey", str)
DEFAULT_QUEUE = "default"
NODE_NAME_REASON = "node(s) didn't match the requested node name"
_T = TypeVar("_T")


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


BASE_DIMS = ("cpu", "memory", "gpu")


@dataclass(frozen=True)
class Resources:
    """A resource vector for fairness and quotas: CPU milli, memory bytes, GPU milli, and scalar
    resources by name (MIG slices by their resource name, extended resources, storage), as
    Volcano's `Resource` carries its ScalarResources. A missing scalar is zero."""

    cpu: int = 0
    memory: int = 0
    gpu: int = 0
    scalars: Scalars = ()

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu, combine(self.scalars, other.scalars)
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.gpu - other.gpu,
            combine(self.scalars, other.scalars, -1),
        )

    def fits_in(self, other: Resources) -> bool:
        if not (self.cpu <= other.cpu and self.memory <= other.memory and self.gpu <= other.gpu):
            return False
        return all(amount <= amount_of(other.scalars, name) for name, amount in self.scalars)

    def within(self, limit: Resources) -> bool:
        """Fits in a limit that names only some scalars (a queue's capability): a scalar the limit
        does not name is not limited."""
        if not (self.cpu <= limit.cpu and self.memory <= limit.memory and self.gpu <= limit.gpu):
            return False
        named = dict(limit.scalars)
        return all(amount <= named[name] for name, amount in self.scalars if name in named)

    def get(self, dim: str) -> int:
        """The amount of one dimension: cpu, memory, gpu or a scalar resource's name."""
        if dim == "cpu":
            return self.cpu
        if dim == "memory":
            return self.memory
        if dim == "gpu":
            return self.gpu
        return amount_of(self.scalars, dim)

    def dims(self) -> tuple[str, ...]:
        """cpu, memory, gpu, then the scalar names this vector holds."""
        return BASE_DIMS + tuple(name for name, _ in self.scalars) if self.scalars else BASE_DIMS

    def items(self) -> Iterator[tuple[str, int]]:
        yield from (("cpu", self.cpu), ("memory", self.memory), ("gpu", self.gpu))
        yield from self.scalars

    @property
    def is_empty(self) -> bool:
        return not (self.cpu or self.memory or self.gpu or any(amount for _, amount in self.scalars))

    @classmethod
    def build(cls, amounts: Mapping[str, int]) -> Resources:
        """A vector from dimension -> amount (see `get` for the names)."""
        scalars = {name: amount for name, amount in amounts.items() if name not in BASE_DIMS}
        return cls(amounts.get("cpu", 0), amounts.get("memory", 0), amounts.get("gpu", 0), scalars_of(scalars))

    @classmethod
    def of(cls, request: PodRequest) -> Resources:
        scalars = request.scalars
        gpu = request.gpu_milli
        for container in request.gpus:  # MIG slices count under their resource name, as in Volcano
            if container.gpu.resource:
                scalars = combine(scalars, ((container.gpu.resource, container.gpu.count),))
            elif container.gpu.kind is GpuKind.SHARE and container.gpu.core_milli == 0:
                # GPU memory without a compute share still asks for a GPU, as a Volcano vGPU pod's memory
                # is a dimension it asks for: it counts as the smallest share (1 milli a GPU), so that a
                # queue holding its share of every other dimension can take it (HAMi's gpumem alone).
                gpu += container.gpu.count
        return cls(request.cpu_milli, request.memory_bytes, gpu, scalars)


def union_dims(*vectors: Resources) -> tuple[str, ...]:
    """Every dimension any of the vectors holds: cpu, memory, gpu, then scalar names sorted."""
    extra = sorted({name for v in vectors for name, _ in v.scalars})
    return BASE_DIMS + tuple(extra) if extra else BASE_DIMS


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        return tolerates(self, taint)


@dataclass(frozen=True)
class Requirement:
    """A node selector requirement: key In/NotIn/Exists/DoesNotExist/Gt/Lt values; a key with the
    `field:` prefix is a matchFields requirement (`field:metadata.name`), operator `Invalid` stands
    for a term that does not parse (see `kube.semantics.nodeaffinity`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str], name: str = "") -> bool:
        return requirement_matches(self, labels, name)


@dataclass(frozen=True)
class Constraints:
    """Where a pod may run: nodeSelector, required node affinity (terms ORed, requirements ANDed;
    an empty term, or a required affinity with no term, matches no node), the taints it tolerates
    and a preset spec.nodeName. Hashable, so fit masks can be cached per distinct constraint."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_name: str = ""  # spec.nodeName: only that node (kube-scheduler's NodeName filter)

    def matches_node(self, node: NodeMeta) -> bool:
        """The node meets the nodeSelector and the required node affinity."""
        return required_matches(self.node_selector, self.affinity_terms, node.labels, node.name)

    def fits(self, node: NodeMeta) -> str | None:
        """Why the node is not allowed by name, taints or node affinity (kube-scheduler's order), or None."""
        if self.node_name and self.node_name != node.name:
            return NODE_NAME_REASON
        if untolerated(node.taints, self.tolerations) is not None:
            return kube_taints.REASON
        if not self.matches_node(node):
            return nodeaffinity.REASON
        return None


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
    gpu_select: GpuSelector | None = None  # GPUs (models, UUIDs) to use or avoid, per GPU (None = any)
    invalid: str = ""  # why the request cannot be honoured ("" = valid)
    preemptable: bool = True
    pod: Pod | None = None  # the manifest; None in trace replay
    nominated: NodeName | None = None
    constraints: Constraints = Constraints()  # frozen: one shared "anywhere" is safe
    uid: str = ""
    critical: bool = False  # a system-critical pod (conformance never evicts it)
    role: str = ""  # its task in a Volcano Job (`volcano.sh/task-spec`), for the PodGroup's minTaskMember

    @property
    def resources(self) -> Resources:
        return Resources.of(self.request)

    @property
    def best_effort(self) -> bool:
        """Asks for nothing at all, extended resources included (Volcano's `Resreq.IsEmpty`): the
        backfill action's, not allocate's."""
        return self.request.is_empty and not self.invalid

    def clone(self) -> TaskInfo:
        return _shallow(self)


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
    waiting_time: float | None = None  # the PodGroup's sla-waiting-time, seconds (the `sla` plugin)
    quota_request: Mapping[str, Fraction] | None = None  # minResources by name as written (`resourcequota`)
    min_task_member: Mapping[str, int] = field(default_factory=dict)  # the PodGroup's, per task role

    def add(self, task: TaskInfo) -> None:
        self.tasks[task.key] = task

    def roles_short(self, statuses: Collection[TaskStatus]) -> list[tuple[str, int, int]]:
        """The task roles with fewer tasks in `statuses` than the PodGroup's minTaskMember asks, as
        (role, tasks, minimum), by role. None are short when minMember is below the minimums' sum:
        then Volcano counts the job as a whole only (`CheckTaskValid`, `CheckTaskReady`, ...)."""
        wanted = self.min_task_member
        if not wanted or self.min_member < sum(wanted.values()):
            return []
        have = Counter(t.role for t in self.tasks.values() if t.status in statuses)
        return [(role, have[role], need) for role, need in sorted(wanted.items()) if need > 0 and have[role] < need]

    def tasks_in(self, *statuses: TaskStatus) -> list[TaskInfo]:
        wanted = set(statuses)
        return [t for t in self.tasks.values() if t.status in wanted]

    @property
    def pending(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

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
        other = _shallow(self)
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
    deserved: Resources | None = None  # spec.deserved (the `capacity` plugin's share); None: not set
    parent: str = ""  # spec.parent (hierarchical queues); "": under root
    # DRA quota (`deviceclass/<class>` keys of spec.capability) by DeviceClass, and whether the spec
    # names any DRA key at all (capability, deserved or guarantee): Volcano's capacity keeps DRA state then
    dra_capability: Mapping[str, DraLimit] = field(default_factory=dict)
    has_dra: bool = False

    def clone(self) -> QueueInfo:
        return _shallow(self)


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
    images: tuple[tuple[str, int], ...] = ()  # (image name, size in bytes) from status.images, per name


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
    meta_version: int = 0  # changes whenever any node's labels, taints or schedulability change
    capacity: Resources = field(default_factory=Resources)  # of all schedulable nodes
    queue_allocated: dict[str, Resources] = field(default_factory=dict)  # held by running pods, per queue
    # pods on nodes and namespace labels, for inter-pod affinity and spread (`pods`); a cache that
    # shares its live structures with the session may hand over how to freeze them instead, done
    # on first use (most sessions of a simulation have no plugin that reads them)
    pod_source: PodSet | Callable[[], PodSet] = EMPTY_PODS
    budgets: tuple[DisruptionBudget, ...] = ()  # PodDisruptionBudgets (when a plugin asks for them)
    quotas: Mapping[str, tuple[NamespaceQuota, ...]] = field(default_factory=dict)  # ResourceQuotas by namespace
    # the cache's memo of pods' facts, lent to the session: the inter-pod plugins parse the pods they
    # place into it, so the cache books them without parsing them again (a fresh one if not lent)
    pod_facts: PodFactsMemo = field(default_factory=PodFactsMemo)
    # PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes (when a plugin asks for them)
    volumes: VolumeCatalog = EMPTY_CATALOG
    dra: DraCatalog = EMPTY_DRA  # ResourceClaims, DeviceClasses, ResourceSlices (when a plugin asks for them)
    # per queue, the manifests of its bound and binding pods that use ResourceClaims (DRA quotas); None
    # where the cache does not keep them (then the session's jobs say which pods hold claims)
    claim_users: Mapping[str, tuple[Pod, ...]] | None = None

    @property
    def pods(self) -> PodSet:
        if not isinstance(self.pod_source, PodSet):
            self.pod_source = self.pod_source()
        return self.pod_source

    def tasks(self) -> Iterator[TaskInfo]:
        for job in self.jobs.values():
            yield from job.tasks.values()

    def model_mask(self, allowed: frozenset[str] | None) -> np.ndarray:
        """Rows whose GPU model is in `allowed` (all rows when allowed is None)."""
        if allowed is None:
            return np.ones(self.table.rows, np.bool_)
        ids = [i for i, name in enumerate(self.model_names) if name in allowed]
        return np.isin(self.model_ids[: self.table.rows], ids)


def _shallow(obj: _T) -> _T:
    """A shallow copy of a plain (non-slots) dataclass instance: what copy.copy makes, at a tenth of its
    cost (it runs for every job and task of every session's snapshot)."""
    other: _T = object.__new__(type(obj))
    other.__dict__.update(obj.__dict__)
    return other
