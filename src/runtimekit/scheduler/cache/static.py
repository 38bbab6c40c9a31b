"""A cache over a fixed set of nodes with jobs added by the caller: trace replay and tests.

With `share_table=True` a session works on the cache's own node table instead of a copy (nothing
else writes to it), so a commit only records the booking; a discarded statement has already
given everything back; the pods on nodes are frozen for a session only when a plugin reads them
(a trace replay runs one session per pod, mostly without one). Decisions are recorded, not sent
anywhere: a bind runs the PreBind and Bind plugins at once and keeps the `Binding` (`bindings`); a
failed one leaves the task pending. DRA objects go into `dra` (the live scheduler's `DraStore`,
frozen per session) and PreBind writes claims through `claim_access` (trace replay through claims).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from runtimekit.model import (
    Ledger,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
)
from runtimekit.model.ledger import IntArray
from runtimekit.model.scalars import Scalars, combine
from runtimekit.scheduler.cache.dra import DraStore
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks, Binding, ClaimAccess, VolumeAccess
from runtimekit.scheduler.framework.info import (
    DEFAULT_QUEUE,
    JobInfo,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    Snapshot,
    TaskInfo,
    TaskStatus,
)
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.framework.policy import DisruptionBudget, NamespaceQuota
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, FitErrors, Status
from runtimekit.scheduler.kubesem.podbook import PodBook
from runtimekit.scheduler.kubesem.volumes import EMPTY_CATALOG, VolumeCatalog


class StaticCache:
    def __init__(
        self,
        nodes: Iterable[tuple[NodeInventory, NodeCapacity, NodeMeta]],
        queues: Iterable[QueueInfo] = (),
        rank: Mapping[str, int] | None = None,
        share_table: bool = False,
    ) -> None:
        self.ledger = Ledger()
        self.meta: list[NodeMeta | None] = []
        offered: Scalars = ()  # the extended resources of all nodes together
        for inventory, capacity, meta in nodes:
            offered = combine(offered, capacity.scalars)
            row = self.ledger.table.add_node(inventory, capacity)
            self.meta.extend([None] * (row + 1 - len(self.meta)))
            self.meta[row] = meta
        table = self.ledger.table
        names = table.names()
        self.model_names = sorted({m.gpu_model for m in self.meta if m is not None and m.gpu_model})
        index = {name: i for i, name in enumerate(self.model_names)}
        self.model_ids: IntArray = np.array(
            [index.get(m.gpu_model, -1) if m is not None else -1 for m in self.meta], np.int64
        )
        self.rank = _rank(names, rank)
        self.queues = {q.name: q for q in queues} or {DEFAULT_QUEUE: QueueInfo(DEFAULT_QUEUE)}
        self.jobs: dict[JobKey, JobInfo] = {}
        self.share_table = share_table
        self.bound: dict[PodKey, TaskInfo] = {}
        self.bindings: dict[PodKey, Binding] = {}
        self.evicted: list[tuple[PodKey, str]] = []
        self.unschedulable: dict[PodKey, FitErrors] = {}
        self.pods = PodBook()  # pods on nodes as inter-pod affinity and spread see them (bound ones added)
        # the nodes are fixed, so their total is too
        self.capacity = Resources(
            int(table.cpu_total.sum()), int(table.mem_total.sum()), int(table.gpu_count.sum()) * 1000, offered
        )
        self.now = 0.0
        self.budgets: tuple[DisruptionBudget, ...] = ()  # PodDisruptionBudgets the sessions see
        self.quotas: dict[str, tuple[NamespaceQuota, ...]] = {}  # ResourceQuotas by namespace
        self.volumes: VolumeCatalog = EMPTY_CATALOG  # the storage objects the sessions see (tests)
        self.volume_access: VolumeAccess | None = None  # what PreBind binds volumes through (tests)
        self.dra = DraStore()  # the DRA objects the sessions see (trace replay through claims; tests)
        self.claim_access: ClaimAccess | None = None  # what PreBind writes claims' status through

    def fresh(self, rank: Mapping[str, int] | None = None) -> StaticCache:
        """A new cache over the same nodes as they are now, with a copy of the node table and no
        jobs or bookings (building the nodes is most of the cost of a cache); `rank` as in
        `__init__`. For a cache that has booked nothing (raises ValueError otherwise)."""
        if self.ledger.bookings():
            raise ValueError("fresh() copies a cache that has booked nothing")
        other = StaticCache([], share_table=self.share_table)
        other.ledger = Ledger(self.ledger.table.copy())
        other.meta, other.model_names, other.model_ids = self.meta, self.model_names, self.model_ids
        other.rank = _rank(other.ledger.table.names(), rank)
        other.queues = {k: q.clone() for k, q in self.queues.items()}
        other.capacity, other.now = self.capacity, self.now
        return other

    def add_job(self, job: JobInfo) -> None:
        self.jobs[job.key] = job

    def remove_job(self, key: JobKey) -> None:
        self.jobs.pop(key, None)

    def node(self, name: str) -> NodeName:
        return NodeName(name)

    # -- Cache -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        table = self.ledger.table if self.share_table else self.ledger.table.copy()
        jobs = self.jobs if self.share_table else {k: j.clone() for k, j in self.jobs.items()}
        queues = self.queues if self.share_table else {k: q.clone() for k, q in self.queues.items()}
        capacity = self.capacity
        allocated: dict[str, Resources] = {}
        if not self.share_table:
            for job in self.jobs.values():
                allocated[job.queue] = allocated.get(job.queue, Resources()) + job.allocated()
        return Snapshot(
            table,
            self.meta,
            jobs,
            queues,
            self.rank,
            self.model_ids,
            self.model_names,
            self.now,
            0,
            capacity,
            allocated,
            self.pods.frozen if self.share_table else self.pods.frozen(),
            budgets=self.budgets,
            quotas=self.quotas,
            pod_facts=self.pods.facts,
            volumes=self.volumes,
            dra=self.dra.frozen(),
        )

    def bind(
        self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks | None = None, group: BindGroup | None = None
    ) -> None:
        del group  # binds at once, in order: a group's PreBinds have all run when its last member binds
        assert task.placement is not None
        assert task.node is not None
        binding = Binding(task, task.node, choice, volumes=self.volume_access, claims=self.claim_access)
        if hooks is not None:
            status = hooks.pre_bind(binding)
            if status is SUCCESS or status.ok:
                status = hooks.bind(binding)  # SKIP: no plugin bound it, the cache records it
            if status is not SKIP and not status.ok:
                hooks.unreserve(task)
                self._unbind(task, status)
                return
        if self.share_table:
            self.ledger.record(task.key, task.placement)
        else:
            self.ledger.reserve(task.key, task.placement)
        task.status = TaskStatus.BOUND
        self.bound[task.key] = task
        self.bindings[task.key] = binding
        if task.node is not None:
            self.pods.add_pod(task.key, task.pod, task.namespace, task.node)
        job = self.jobs.get(task.job)
        if job is not None and task.key in job.tasks and job.tasks[task.key] is not task:
            job.tasks[task.key].status = TaskStatus.BOUND
            job.tasks[task.key].node = task.node
            job.tasks[task.key].placement = task.placement

    def _unbind(self, task: TaskInfo, status: Status) -> None:
        """A failed bind: the placement goes back, the task waits (the failure is its reason)."""
        assert task.placement is not None
        if self.share_table:  # the session took it from this cache's own table
            self.ledger.table.give(task.placement)
        task.status, task.node, task.placement = TaskStatus.PENDING, None, None
        self.unschedulable[task.key] = FitErrors(status=status)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """The pod is deleted at once (its resources come back)."""
        self.evicted.append((task.key, reason))
        if not self.share_table:
            self.ledger.release(task.key)
        else:
            self.ledger.forget(task.key)
        self.bound.pop(task.key, None)
        self.pods.remove(task.key)
        job = self.jobs.get(task.job)
        if job is not None:
            job.tasks.pop(task.key, None)

    def job_updated(self, job: JobInfo) -> None:
        self.unschedulable.update(job.fit_errors)


def _rank(names: list[NodeName | None], order: Mapping[str, int] | None) -> IntArray:
    """Tie-break rank per row: from `order` (default: by node name); free rows and unlisted nodes last."""
    order = order or {name: i for i, name in enumerate(sorted(n for n in names if n is not None))}
    return np.array([order.get(n, len(order)) if n is not None else len(order) for n in names], np.int64)
