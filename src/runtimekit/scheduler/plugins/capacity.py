"""`capacity`: queues get what they deserve (Volcano's capacity plugin, the successor of
`proportion`). A queue's `deserved` is set on it (not worked out by weight); its `capability` caps
it and its `guarantee` is kept for it. The capability a queue really has is what the cluster has
beyond every queue's guarantee, plus its own guarantee, capped by its capability (`capacity_tree.py`).

- QueueOrder: higher queue `priority` first, then the lower share (allocated/deserved); a queue that
  deserves nothing comes after those that deserve something;
- Allocatable: the queue is Open and what it holds plus the task stays within its real capability
  (on the dimensions the task asks for);
- JobEnqueueable / JobEnqueued: a pod group's minResources plus what the queue holds and has admitted
  stay within its real capability;
- Preemptive: the queue may reclaim for a task when, with the task, it stays within its real
  capability and is still at or below its deserved share on some dimension the task asks for;
- Reclaimable: a victim of another queue may be taken when that queue stays at or above its
  guarantee without it and holds more than it deserves on a dimension the victim uses (or deserves
  nothing the victim uses), and the victim uses something the reclaimer asks for.
- EventHandler: keeps what each queue holds up to date within the session.

With `capacity.DynamicResourceAllocationEnable: true` queues also limit the DRA devices their pods'
claims hold (`deviceclass/<class>` keys of the capability; `capacity_dra.py`).

With `enableHierarchy: true` queues form a tree under `root` (`spec.parent`): jobs run in leaf queues
only, every check holds for the queue and all its ancestors, children inherit unset capabilities,
and queues are ordered by the share of their branch. Argument `ancestorReclaimLevel` (0): also check
the deserved share of that many levels of ancestors before reclaiming across branches. A queue tree
that is broken (a cycle, a missing parent, a job in a queue with children) stops this plugin from
admitting anything, with the reason logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimekit.scheduler.framework.arguments import Arguments, parse_arguments
from runtimekit.scheduler.framework.info import JobInfo, JobKey, QueueInfo, TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    Allocatable,
    EventHandler,
    JobEnqueueable,
    JobEnqueued,
    Plugin,
    Preemptive,
    QueueOrder,
    Reclaimable,
    VictimQueueOrder,
    Vote,
    Watches,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.capacity_dra import EXCEEDED, DraQuotas
from runtimekit.scheduler.plugins.capacity_tree import (
    BASE,
    MIN,
    ROOT,
    Attr,
    HierarchyError,
    Vec,
    add,
    build_flat,
    build_tree,
    fits_on,
    sub,
    vec,
)

NAME = "capacity"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapacityArgs:
    ancestor_reclaim_level: int = 0
    dynamic_resource_allocation_enable: bool = False
    dra_consumable_capacity_enable: bool = False


def _intersects(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return any(v > 0 and b.get(d, 0.0) > 0 for d, v in a.items())


def _relevant(deserved: Mapping[str, float], request: Mapping[str, float]) -> list[str]:
    """The dimensions of the request that the deserved share speaks of (cpu and memory only when it
    deserves some)."""
    return [d for d, q in request.items() if q > 0 and (deserved.get(d, 0.0) >= MIN if d in BASE else d in deserved)]


def _common_level(attr: Attr, other: Attr) -> int:
    """How deep the two queues' common ancestors go (0: the root only; Volcano's getQueueLevel)."""
    level = 0
    for i, (a, b) in enumerate(zip(attr.ancestors, other.ancestors, strict=False)):
        if a != b:
            break
        level = i
    return level


def _at_or_below(used: Mapping[str, float], deserved: Mapping[str, float], request: Mapping[str, float]) -> bool:
    """Some dimension the request asks for, not empty in both, where `used` is within `deserved`
    (Volcano's LessEqualPartlyWithDimensionZeroFiltered)."""
    dims = [d for d, q in request.items() if q > 0 and not (used.get(d, 0.0) < MIN and deserved.get(d, 0.0) < MIN)]
    return any(used.get(d, 0.0) <= deserved.get(d, 0.0) for d in dims)


class Capacity(
    Plugin,
    QueueOrder,
    Allocatable,
    JobEnqueueable,
    JobEnqueued,
    Preemptive,
    Reclaimable,
    VictimQueueOrder,
    EventHandler,
):
    name = NAME
    hierarchy = True

    def __init__(self, args: CapacityArgs) -> None:
        self.args = args
        self.attrs: dict[str, Attr] = {}
        self.jobs: Mapping[JobKey, JobInfo] = {}
        self.ready = True
        self.tree = False
        self.dra = DraQuotas(args.dra_consumable_capacity_enable) if args.dynamic_resource_allocation_enable else None

    def on_session_open(self, ssn: SessionView) -> None:
        self.tree = bool(self.flags.get("enableHierarchy", False))
        self.jobs = ssn.jobs
        snapshot = ssn.snapshot
        build = build_tree if self.tree else build_flat
        try:
            self.attrs = build(ssn.queues, ssn.jobs, vec(snapshot.capacity), snapshot.queue_allocated)
            self.ready = True
        except HierarchyError as exc:
            if self.ready:
                log.error("capacity: %s; nothing is admitted until the queues form a tree under root", exc)
            self.attrs, self.ready = {}, False
        if self.dra is not None:
            self.dra.open(snapshot.dra.claims, self.attrs, list(ssn.jobs.values()), snapshot.claim_users, self._chain)

    def _chain(self, attr: Attr) -> list[Attr]:
        """The queue and its ancestors, the queue first."""
        return [attr, *(self.attrs[a] for a in reversed(attr.ancestors))]

    def _leaf(self, attr: Attr) -> bool:
        return not (self.tree and attr.children)

    # -- QueueOrder ------------------------------------------------------------------------
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return right.priority - left.priority
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if la is None or ra is None:
            return 0
        if self.tree:
            ll, rl = not la.children, not ra.children
            if ll != rl:
                return -1 if ll else 1
            if ll:  # two leaves: the branches below their deepest common ancestor
                la, ra = self._branch(la, ra), self._branch(ra, la)
        return _compare(la, ra)

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """In a queue tree, victims of the queue nearest the preemptor's go first (the deepest common
        ancestor: a sibling before a cousin), as Volcano's capacity orders them."""
        la, ra, pa = self.attrs.get(left.name), self.attrs.get(right.name), self.attrs.get(preemptor.name)
        if not self.tree or la is None or ra is None or pa is None:
            return 0
        return _common_level(ra, pa) - _common_level(la, pa)

    def _branch(self, attr: Attr, other: Attr) -> Attr:
        level = _common_level(attr, other)
        return self.attrs[attr.ancestors[level + 1]] if level + 1 < len(attr.ancestors) else attr

    # -- Allocatable, enqueue --------------------------------------------------------------
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if queue.state != "Open" or not self.ready:
            return False
        if attr is None:
            return True
        if not self._leaf(attr):
            return False
        chain = self._chain(attr)
        if self.dra is not None:
            why = self.dra.allocatable(chain, task)
            if why:
                log.info("capacity: %s/%s waits for DRA quota: %s", task.namespace, task.name, why)
                return False
        request = vec(task.resources)
        return all(fits_on(request, add(a.allocated, request), a.real) for a in chain)

    def job_enqueueable(self, job: JobInfo) -> Vote:
        attr = self.attrs.get(job.queue)
        if not self.ready or (attr is not None and not self._leaf(attr)):
            return Vote.REJECT
        if attr is None:
            return Vote.ABSTAIN
        if attr.queue.state != "Open":
            return Vote.REJECT
        if job.min_resources is None:
            return Vote.PERMIT
        need = vec(job.min_resources)
        for a in self._chain(attr):
            if not fits_on(need, add(add(need, a.allocated), a.inqueue), a.real):
                log.info(
                    "capacity: pod group %s/%s waits: queue %s has no room for its minResources",
                    job.namespace,
                    job.name,
                    a.name,
                )
                return Vote.REJECT
        why = self.dra.enqueueable(self._chain(attr), job) if self.dra is not None else ""
        if why:
            log.info("capacity: pod group %s/%s waits: %s (%s)", job.namespace, job.name, EXCEEDED, why)
            return Vote.REJECT
        return Vote.PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            for a in self._chain(attr):
                a.inqueue = add(a.inqueue, vec(job.min_resources))
        if attr is not None and self.dra is not None:
            self.dra.enqueued(self._chain(attr), job)

    # -- reclaim ---------------------------------------------------------------------------
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs.get(queue.name)
        if not self.ready or attr is None or queue.state != "Open":
            return False
        request = vec(task.resources)
        future = add(attr.allocated, request)
        if not fits_on(request, future, attr.real):
            return False
        if _at_or_below(future, attr.deserved, request):
            return True
        for level in range(1, self.args.ancestor_reclaim_level + 1) if self.tree else ():
            ancestor = self._ancestor(attr, level)
            if ancestor is not None and _at_or_below(add(ancestor.allocated, request), ancestor.deserved, request):
                return True
        return False

    def _ancestor(self, attr: Attr, depth: int) -> Attr | None:
        """The ancestor `depth` levels up, None past the top or at root."""
        if depth > len(attr.ancestors) or attr.ancestors[-depth] == ROOT:
            return None
        return self.attrs[attr.ancestors[-depth]]

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        if not self.ready:
            return []
        job = self.jobs.get(reclaimer.job)
        mine = self.attrs.get(job.queue) if job is not None else None
        if mine is None:
            return []
        wants = vec(reclaimer.resources)
        held: dict[str, Vec] = {}  # per queue, what it holds with the victims chosen so far taken out
        victims = []
        for task in candidates:
            owner = self.jobs.get(task.job)
            attr = self.attrs.get(owner.queue) if owner is not None else None
            uses = vec(task.resources)
            if attr is None or not _intersects(uses, wants):
                continue
            allocated = held.setdefault(attr.name, dict(attr.allocated))
            rest = sub(allocated, uses)
            if any(g > rest.get(d, 0.0) for d, g in attr.guarantee.items()):
                continue  # it would leave its queue below its guarantee
            if not self._eligible(attr, allocated, uses, mine, wants):
                continue
            ancestors = self._ancestors_to_check(mine, attr, held, uses)
            if ancestors is None:
                continue
            for a in [attr, *ancestors]:
                held[a.name] = sub(held.setdefault(a.name, dict(a.allocated)), uses)
            victims.append(task)
        return victims

    def _eligible(self, attr: Attr, allocated: Vec, uses: Vec, mine: Attr, wants: Vec) -> bool:
        if not _intersects(uses, attr.deserved):  # it deserves nothing the victim uses
            shared = self.tree and self.args.ancestor_reclaim_level > 0 and self._share_ancestor(mine, attr)
            return not (shared and not _intersects(wants, mine.deserved))
        return any(allocated.get(d, 0.0) > attr.deserved.get(d, 0.0) for d in _relevant(attr.deserved, uses))

    def _share_ancestor(self, a: Attr, b: Attr) -> bool:
        level = self.args.ancestor_reclaim_level
        ours = {x.name for depth in range(1, level + 1) if (x := self._ancestor(a, depth)) is not None}
        theirs = {x.name for depth in range(1, level + 1) if (x := self._ancestor(b, depth)) is not None}
        return bool(ours & theirs)

    def _ancestors_to_check(self, mine: Attr, attr: Attr, held: dict[str, Vec], uses: Vec) -> list[Attr] | None:
        """The victim's ancestors (up to ancestorReclaimLevel levels, not shared with the reclaimer)
        that give the victim up too; None when one of them holds no more than it deserves of what the
        victim uses."""
        if not self.tree or self.args.ancestor_reclaim_level <= 0:
            return []
        out = []
        for depth in range(1, self.args.ancestor_reclaim_level + 1):
            theirs, ours = self._ancestor(attr, depth), self._ancestor(mine, depth)
            if theirs is None or (ours is not None and ours.name == theirs.name):
                continue
            out.append(theirs)
            if not _intersects(uses, theirs.deserved):
                continue
            allocated = held.setdefault(theirs.name, dict(theirs.allocated))
            if not any(allocated.get(d, 0.0) > theirs.deserved.get(d, 0.0) for d in _relevant(theirs.deserved, uses)):
                return None
        return out

    # -- EventHandler ----------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        self._move(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._move(task, -1)

    def _move(self, task: TaskInfo, sign: int) -> None:
        job = self.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        amount = vec(task.resources)
        chain = self._chain(attr)
        for a in chain:
            a.allocated = add(a.allocated, amount) if sign > 0 else sub(a.allocated, amount)
            a.update_share()
        if self.dra is not None:
            self.dra.move(chain, task, sign)


def _compare(left: Attr, right: Attr) -> int:
    if left.share != right.share:
        return -1 if left.share < right.share else 1
    ld, rd = any(v > 0 for v in left.deserved.values()), any(v > 0 for v in right.deserved.values())
    return 0 if ld == rd else (-1 if ld else 1)


def build(arguments: Arguments, context: BuildContext) -> Capacity:
    args = parse_arguments(
        CapacityArgs,
        NAME,
        arguments,
        {
            "ancestorReclaimLevel": "ancestor_reclaim_level",
            "DynamicResourceAllocationEnable": "dynamic_resource_allocation_enable",
            "DRAConsumableCapacityEnable": "dra_consumable_capacity_enable",
        },
    )
    if args.ancestor_reclaim_level < 0:
        context.warn(f"{NAME}: ancestorReclaimLevel must not be negative, got {args.ancestor_reclaim_level}; 0 is used")
        args = CapacityArgs(0, args.dynamic_resource_allocation_enable, args.dra_consumable_capacity_enable)
    if args.dra_consumable_capacity_enable and not args.dynamic_resource_allocation_enable:
        context.warn(
            f"{NAME}: {NAME}.DRAConsumableCapacityEnable has no effect without {NAME}.DynamicResourceAllocationEnable"
        )
    return DraCapacity(args) if args.dynamic_resource_allocation_enable else Capacity(args)


class DraCapacity(Capacity, Watches):
    """`capacity` with DRA quotas on: it reads the ResourceClaims its queues' pods use."""

    watches: tuple[str, ...] = ("resourceclaims",)
    needs_claim_users = True  # the snapshot's claim_users: what each queue's bound pods' claims hold
