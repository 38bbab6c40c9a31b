"""`proportion`: queues share the cluster by weight. Each queue's `deserved` share is filled by
weight (water-filling), capped by its `capability` and by what its jobs ask for, and never below
its `guarantee`. Queues with the smaller allocated/deserved share go first; a queue that holds its
share is `overused` and gets nothing more this session; a queue may not exceed its capability;
other queues may reclaim what a queue holds beyond its share (if that queue is reclaimable); a queue
reclaims for a pod only while it is Open and the pod fits in its deserved share (Volcano's
Preemptive: allocated + request within deserved, in the dimensions the pod asks for). What a queue
holds is the snapshot's `queue_allocated` (bound pods and those binding); a PodGroup's minResources
reserve (`inqueue`) only what its job does not hold yet, while Inqueue or Running with its gang
complete (Volcano's GetInqueueResource).

Implements QueueOrder, Overused, Allocatable, Preemptive, Reclaimable, JobEnqueueable, JobEnqueued and
EventHandler, and reports each queue's figures for Volcano's queue metrics (ReportsQueues)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import (
    BASE_DIMS,
    JobInfo,
    JobKey,
    QueueInfo,
    Resources,
    TaskInfo,
    TaskStatus,
    union_dims,
)
from runtimekit.scheduler.framework.interfaces import (
    Allocatable,
    EventHandler,
    JobEnqueueable,
    JobEnqueued,
    Overused,
    Plugin,
    Preemptive,
    QueueOrder,
    Reclaimable,
    Vote,
)
from runtimekit.scheduler.framework.observe import QueueFigures, ReportsQueues
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments


def _get(r: Resources, dim: str) -> int:
    return r.get(dim)


def _min(a: Resources, b: Resources) -> Resources:
    return Resources.build({d: min(a.get(d), b.get(d)) for d in union_dims(a, b)})


def _capped(total: Resources, capability: Resources) -> Resources:
    """The cluster's total limited by a capability; scalars the capability does not name stay whole."""
    named = {name for name, _ in capability.scalars}
    dims = union_dims(total, capability)
    return Resources.build(
        {d: min(total.get(d), capability.get(d)) if d in BASE_DIMS or d in named else total.get(d) for d in dims}
    )


def _exceeded(a: Resources, b: Resources) -> Resources:
    """The part of `a` above `b`, dimension by dimension (Volcano's ExceededPart)."""
    return Resources.build({d: max(0, a.get(d) - b.get(d)) for d in a.dims()})


def _max(a: Resources, b: Resources) -> Resources:
    return Resources.build({d: max(a.get(d), b.get(d)) for d in union_dims(a, b)})


@dataclass
class QueueAttr:
    queue: QueueInfo
    allocated: Resources = field(default_factory=Resources)
    request: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    deserved: Resources = field(default_factory=Resources)
    capability: Resources = field(default_factory=Resources)

    def share(self) -> float:
        dims = union_dims(self.allocated, self.deserved)
        shares = [_get(self.allocated, d) / _get(self.deserved, d) for d in dims if _get(self.deserved, d) > 0]
        return max(shares, default=0.0)


def water_fill(attrs: Sequence[QueueAttr], total: Resources) -> None:
    """Give each queue its deserved resources: by weight, capped by capability and request."""
    dims = union_dims(total, *(a.request for a in attrs), *(a.queue.guarantee for a in attrs))
    for attr in attrs:
        attr.deserved = _min(attr.queue.guarantee, attr.capability)
    remaining = total - Resources.build({d: sum(_get(a.deserved, d) for a in attrs) for d in dims})
    for _ in range(32):
        hungry = [a for a in attrs if any(_get(a.deserved, d) < _get(_min(a.request, a.capability), d) for d in dims)]
        if not hungry or all(_get(remaining, d) <= 0 for d in dims):
            break
        weight = sum(a.queue.weight for a in hungry)
        given = Resources()
        for attr in hungry:
            offer = Resources.build({d: max(0, _get(remaining, d)) * attr.queue.weight // weight for d in dims})
            target = _min(attr.deserved + offer, _min(attr.request, attr.capability))
            target = _max(target, attr.deserved)
            given = given + (target - attr.deserved)
            attr.deserved = target
        if all(_get(given, d) == 0 for d in dims):
            break
        remaining = remaining - given


class Proportion(
    Plugin,
    QueueOrder,
    Overused,
    Allocatable,
    Preemptive,
    Reclaimable,
    JobEnqueueable,
    JobEnqueued,
    EventHandler,
    ReportsQueues,
):
    name = "proportion"

    def __init__(self) -> None:
        self.attrs: dict[str, QueueAttr] = {}
        self.jobs: Mapping[JobKey, JobInfo] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        total: Resources = ssn.snapshot.capacity
        self.jobs = ssn.jobs
        self.attrs = {
            name: QueueAttr(
                q,
                ssn.snapshot.queue_allocated.get(name, Resources()),
                capability=_capped(total, q.capability) if q.capability else total,
            )
            for name, q in ssn.queues.items()
        }
        for attr in self.attrs.values():
            attr.request = attr.allocated
        for job in ssn.jobs.values():
            owner = self.attrs.get(job.queue)
            if owner is None:
                continue
            for task in job.tasks.values():
                if task.status is TaskStatus.PENDING:
                    owner.request = owner.request + task.resources
            if job.min_resources is not None and (
                job.phase == "Inqueue" or (job.phase == "Running" and job.ready_count() >= job.min_member)
            ):
                # Volcano's GetInqueueResource: what minResources reserves beyond what the job already
                # holds, which `allocated` counts (a job read Inqueue with members bound or binding,
                # as after a restart, counted them twice and kept the queue's next job out)
                owner.inqueue = owner.inqueue + _exceeded(job.min_resources, job.allocated())
        water_fill(list(self.attrs.values()), total)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return right.priority - left.priority
        a, b = self.attrs.get(left.name), self.attrs.get(right.name)
        sa, sb = (a.share() if a else 0.0), (b.share() if b else 0.0)
        return -1 if sa < sb else (1 if sa > sb else 0)

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None:
            return False
        # Volcano's `deserved.LessEqual(allocated, Zero)`: every dimension of either is held
        return all(_get(attr.deserved, d) <= _get(attr.allocated, d) for d in union_dims(attr.deserved, attr.allocated))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if attr is None or queue.capability is None:  # no capability: the nodes decide
            return True
        return (attr.allocated + task.resources).within(attr.capability)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Volcano's `queueAllocatable`: the queue is Open and, in each dimension the task asks for,
        what it holds plus the task stays within its deserved share."""
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if queue.state != "Open":
            return False
        future = attr.allocated + task.resources
        return all(future.get(d) <= attr.deserved.get(d) for d, amount in task.resources.items() if amount > 0)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        victims = []
        taken: dict[str, Resources] = {}
        for task in candidates:
            job = self.jobs.get(task.job)
            attr = self.attrs.get(job.queue if job else "")
            if attr is None or not attr.queue.reclaimable:
                continue
            left = attr.allocated - taken.get(attr.queue.name, Resources())
            if any(_get(left, d) > _get(attr.deserved, d) for d in union_dims(left, attr.deserved)):
                taken[attr.queue.name] = taken.get(attr.queue.name, Resources()) + task.resources
                victims.append(task)
        return victims

    def job_enqueueable(self, job: JobInfo) -> Vote:
        attr = self.attrs.get(job.queue)
        if attr is None:
            return Vote.ABSTAIN
        if attr.queue.state != "Open":
            return Vote.REJECT
        if job.min_resources is None:
            return Vote.PERMIT
        fits = (job.min_resources + attr.allocated + attr.inqueue).within(attr.capability)
        return Vote.PERMIT if fits else Vote.REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.inqueue = attr.inqueue + job.min_resources

    def on_allocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is not None:
            attr.allocated = attr.allocated + task.resources

    def on_deallocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is not None:
            attr.allocated = attr.allocated - task.resources

    def queue_figures(self) -> Mapping[str, QueueFigures]:
        return {
            name: QueueFigures(
                request=attr.request,
                inqueue=attr.inqueue,
                deserved=attr.deserved,
                capability=attr.queue.capability,
                real_capability=attr.capability,
                share=attr.share(),
                weight=attr.queue.weight,
                overused=self.overused(attr.queue),
            )
            for name, attr in self.attrs.items()
        }

    def _attr_of(self, task: TaskInfo) -> QueueAttr | None:
        job = self.jobs.get(task.job)
        return self.attrs.get(job.queue) if job is not None else None


def build(arguments: Arguments, context: BuildContext) -> Proportion:
    no_arguments("proportion", arguments)
    return Proportion()
