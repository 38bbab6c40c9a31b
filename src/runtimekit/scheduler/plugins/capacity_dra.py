"""The `capacity` plugin's queue quotas over DRA devices (`capacity.DynamicResourceAllocationEnable`,
Volcano's "DeviceClass Quota"; the figures are `kubesem/draquota.py`'s).

Only a queue whose spec names a DRA key (`deviceclass/<class>`, `<dim>.deviceclass/<class>`) keeps DRA
state, and only its `capability` limits: `deserved` and `guarantee` DRA keys are read by nothing here,
as in Volcano. With hierarchical queues every ancestor with DRA state is checked too.
- At session open a queue holds the claims of its bound and binding pods (the snapshot's
  `claim_users`; where a cache does not keep them, its tasks that are Allocated, Binding, Bound or
  Running), each claim once; an ancestor counts only the classes its own capability names.
- Allocatable: the claims a pod would add (those its queue does not hold yet) stay within the queue's
  capability (and each ancestor's).
- JobEnqueueable: a pod group with minResources is admitted only when its least DRA need (per role of
  minTaskMember, one pod's claims times the role's minimum; without roles, the first minMember pods
  that use claims, by namespace, name and UID) fits beside what the queue holds and has admitted this
  session (reason `dra-resource-exceeded`); the enqueue action admits a pod group without minResources
  without asking, as Volcano's does.
- Allocate and deallocate events move the claims' amounts, a shared claim with its last pod.
With `capacity.DRAConsumableCapacityEnable` the consumable-capacity dimensions are checked as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from runtimekit.kube.objects import Pod, ResourceClaim
from runtimekit.model import PodKey
from runtimekit.scheduler.framework.info import JobInfo, TaskInfo, TaskStatus
from runtimekit.scheduler.kubesem.draquota import (
    Demand,
    QueueClaims,
    add_demand,
    exceeded,
    pod_demands,
    total_demand,
)
from runtimekit.scheduler.plugins.capacity_tree import Attr

log = logging.getLogger(__name__)
EXCEEDED = "dra-resource-exceeded"  # Volcano's reason for a pod group its queue's DRA quota keeps out
HOLDING = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
Chain = Callable[[Attr], list[Attr]]  # a queue and its ancestors, the queue first


class DraQuotas:
    """One session's DRA quota state of every queue; see the module docstring."""

    def __init__(self, consumable: bool) -> None:
        self.consumable = consumable
        self.claims: Mapping[str, ResourceClaim] = {}
        self.held: dict[str, QueueClaims] = {}
        self.inqueue: dict[str, Demand] = {}
        self._demands: dict[PodKey, dict[str, Demand]] = {}

    def open(
        self,
        claims: Mapping[str, ResourceClaim],
        attrs: Mapping[str, Attr],
        jobs: Sequence[JobInfo],
        users: Mapping[str, tuple[Pod, ...]] | None,
        chain: Chain,
    ) -> None:
        """What each queue holds: the claims of `users` (per queue, its bound and binding pods that use
        claims, as the cache keeps them), else of the jobs' tasks that hold resources."""
        self.claims, self._demands, self.inqueue = claims, {}, {}
        self.held = {name: QueueClaims() for name, attr in attrs.items() if attr.queue.has_dra}
        if not self.held:
            return
        if users is None:
            for job in jobs:
                for task in job.tasks.values():
                    if task.status in HOLDING:
                        self._hold(attrs.get(job.queue), self.of(task), chain)
            return
        for queue, pods in users.items():
            for pod in pods:
                self._hold(attrs.get(queue), pod_demands(pod, claims), chain)

    def _hold(self, attr: Attr | None, demands: Mapping[str, Demand], chain: Chain) -> None:
        if attr is None or not demands:
            return
        for depth, owner in enumerate(chain(attr)):
            held = self.held.get(owner.name)
            if held is not None:  # an ancestor counts the classes its own capability names
                held.add(demands, only=owner.queue.dra_capability if depth else None)

    def of(self, task: TaskInfo) -> dict[str, Demand]:
        """What each claim of the task's pod asks (read once per session)."""
        found = self._demands.get(task.key)
        if found is None:
            found = self._demands[task.key] = pod_demands(task.pod, self.claims) if task.pod is not None else {}
        return found

    def allocatable(self, chain: list[Attr], task: TaskInfo) -> str:
        """Why a queue of the chain has no room for the claims the task would add ("" when all have)."""
        demands = self.of(task)
        if not demands:
            return ""
        for attr in chain:
            held = self.held.get(attr.name)
            if held is None:
                continue
            why = exceeded(attr.queue.dra_capability, held.allocated, held.new_part(demands), self.consumable)
            if why:
                return f"queue {attr.name}: {why}"
        return ""

    def enqueueable(self, chain: list[Attr], job: JobInfo) -> str:
        need = self.least_need(job)
        if not need:
            return ""
        for attr in chain:
            held = self.held.get(attr.name)
            if held is None:
                continue
            why = exceeded(
                attr.queue.dra_capability, held.allocated, need, self.consumable, self.inqueue.get(attr.name)
            )
            if why:
                return f"queue {attr.name}: {why}"
        return ""

    def enqueued(self, chain: list[Attr], job: JobInfo) -> None:
        need = self.least_need(job)
        for attr in chain if need else ():
            if attr.name in self.held:
                self.inqueue[attr.name] = add_demand(self.inqueue.get(attr.name, {}), need)

    def move(self, chain: list[Attr], task: TaskInfo, sign: int) -> None:
        demands = self.of(task)
        for attr in chain if demands else ():
            held = self.held.get(attr.name)
            if held is not None:
                (held.add if sign > 0 else held.remove)(demands)

    def least_need(self, job: JobInfo) -> Demand:
        """The DRA devices the pod group needs at least (Volcano's GetMinDRAResources)."""
        tasks = sorted(job.tasks.values(), key=_order)
        if job.min_task_member:
            need: Demand = {}
            for role, count in sorted(job.min_task_member.items()):
                one = next((t for t in tasks if t.role == role), None)
                if count > 0 and one is not None:
                    need = add_demand(need, total_demand(self.of(one)), times=count)
            return need
        users = [t for t in tasks if self.of(t)]
        need = {}
        for task in users[: job.min_member]:
            need = add_demand(need, total_demand(self.of(task)))
        return need


def _order(task: TaskInfo) -> tuple[str, str, str]:
    return task.namespace, task.name, task.uid
