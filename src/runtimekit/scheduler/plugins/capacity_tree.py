"""The queue figures of the `capacity` plugin (Volcano's capacity plugin, `buildQueueAttrs` and
`buildHierarchicalQueueAttrs`): per queue its deserved share, guarantee, capability, the capability
it really has (`real`: what the cluster has beyond every queue's guarantee, plus its own guarantee,
capped by its capability), and what it holds, asks and has admitted.

Resource vectors are plain dicts, dimension -> amount (`cpu` milli, `memory` MiB, `gpu` milli, scalar
resources by name). In `capability` a missing dimension is unlimited; everywhere else it is zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from runtimekit.model.scalars import LIMIT
from runtimekit.scheduler.framework.info import JobInfo, JobKey, QueueInfo, Resources, TaskStatus

Vec = dict[str, float]
INF = math.inf
MIN = 0.1  # Volcano's minResource: below it a dimension counts as empty
BASE = ("cpu", "memory")  # always present in Volcano's Resource; other dimensions are scalars
ROOT = "root"


def vec(r: Resources | None) -> Vec:
    return {d: float(v) for d, v in r.items() if v} if r is not None else {}


def capability_vec(r: Resources | None) -> Vec:
    """A queue's capability; unset dimensions are unlimited (left out), and so is a cpu or memory of 0,
    as Volcano reads it (in a hierarchy such a dimension is inherited from the parent)."""
    if r is None:
        return {}
    return {d: float(v) for d, v in r.items() if v < LIMIT and not (d in BASE and v <= 0)}


def add(a: Mapping[str, float], b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for d, v in b.items():
        out[d] = out.get(d, 0.0) + v
    return out


def sub(a: Mapping[str, float], b: Mapping[str, float]) -> Vec:
    out = dict(a)
    for d, v in b.items():
        out[d] = out.get(d, 0.0) - v
    return out


def exceeded(left: Mapping[str, float], right: Mapping[str, float]) -> Vec:
    """The part of `left` above `right` (Volcano's ExceededPart)."""
    return {d: v - right.get(d, 0.0) for d, v in left.items() if v > right.get(d, 0.0)}


def vmax(a: Mapping[str, float], b: Mapping[str, float]) -> Vec:
    return {d: max(a.get(d, 0.0), b.get(d, 0.0)) for d in {*a, *b}}


def min_dim(r: Mapping[str, float], limit: Mapping[str, float], base_missing: float) -> Vec:
    """`r` capped by `limit` dimension by dimension (Volcano's MinDimensionResource with Infinity): a
    scalar `limit` lacks caps nothing; a missing cpu or memory counts as `base_missing`."""
    return {d: min(v, limit.get(d, base_missing if d in BASE else INF)) for d, v in r.items()}


def fits_on(request: Mapping[str, float], used: Mapping[str, float], limit: Mapping[str, float]) -> bool:
    """`used` within `limit` on every dimension the request asks for (a limit's missing one is 0)."""
    return all(used.get(d, 0.0) <= limit.get(d, 0.0) for d, q in request.items() if q > 0)


def share(allocated: Mapping[str, float], deserved: Mapping[str, float]) -> float:
    """allocated/deserved on the most held dimension; a queue that deserves nothing is at 1."""
    ratios = [allocated.get(d, 0.0) / v for d, v in deserved.items() if v > 0]
    return max(ratios) if ratios else 1.0


@dataclass
class Attr:
    queue: QueueInfo
    ancestors: list[str] = field(default_factory=list)  # root first, the parent last
    children: list[str] = field(default_factory=list)
    deserved: Vec = field(default_factory=dict)
    guarantee: Vec = field(default_factory=dict)
    capability: Vec = field(default_factory=dict)  # missing: unlimited
    real: Vec = field(default_factory=dict)  # the capability it really has; missing: 0
    allocated: Vec = field(default_factory=dict)
    request: Vec = field(default_factory=dict)
    inqueue: Vec = field(default_factory=dict)
    share: float = 0.0

    @property
    def name(self) -> str:
        return self.queue.name

    def update_share(self) -> None:
        self.share = share(self.allocated, self.deserved)


def job_figures(job: JobInfo) -> tuple[Vec, Vec]:
    """What a job asks besides what it holds (its pending tasks) and what its admission reserves
    (minResources not yet allocated, while Inqueue, or Running with its gang complete)."""
    pending: Vec = {}
    for task in job.tasks.values():
        if task.status is TaskStatus.PENDING:
            pending = add(pending, vec(task.resources))
    inqueue: Vec = {}
    if job.min_resources is not None and (
        job.phase == "Inqueue" or (job.phase == "Running" and job.ready_count() >= job.min_member)
    ):
        inqueue = exceeded(vec(job.min_resources), vec(job.allocated()))
    return pending, inqueue


def build_flat(
    queues: Mapping[str, QueueInfo],
    jobs: Mapping[JobKey, JobInfo],
    total: Vec,
    allocated: Mapping[str, Resources],
) -> dict[str, Attr]:
    """Every queue's figures without a hierarchy (Volcano's buildQueueAttrs)."""
    total_guarantee: Vec = {}
    for queue in queues.values():
        total_guarantee = add(total_guarantee, vec(queue.guarantee))
    attrs: dict[str, Attr] = {}
    for name, queue in queues.items():
        attr = Attr(queue, guarantee=vec(queue.guarantee), capability=capability_vec(queue.capability))
        attr.real = add(exceeded(total, total_guarantee), attr.guarantee)
        if queue.capability is not None:
            attr.real = min_dim(attr.real, attr.capability, INF)
        attr.allocated = vec(allocated.get(name))
        attr.request = dict(attr.allocated)
        attrs[name] = attr
    _add_jobs(attrs, jobs)
    for attr in attrs.values():
        deserved = min_dim(vec(attr.queue.deserved), attr.real, 0.0)
        attr.deserved = vmax(deserved, attr.guarantee)
        attr.update_share()
    return attrs


def _add_jobs(attrs: Mapping[str, Attr], jobs: Mapping[JobKey, JobInfo]) -> None:
    for job in jobs.values():
        attr = attrs.get(job.queue)
        if attr is None:
            continue
        pending, inqueue = job_figures(job)
        for owner in [attr, *(attrs[a] for a in attr.ancestors)]:
            owner.request = add(owner.request, pending)
            owner.inqueue = add(owner.inqueue, inqueue)


class HierarchyError(ValueError):
    """Queues that do not form a tree under root; the message names the queue."""


def build_tree(
    queues: Mapping[str, QueueInfo],
    jobs: Mapping[JobKey, JobInfo],
    total: Vec,
    allocated: Mapping[str, Resources],
) -> dict[str, Attr]:
    """Every queue's figures in the tree under `root` (Volcano's buildHierarchicalQueueAttrs). Raises
    HierarchyError for a missing parent or root, a cycle, or a job in a queue with children."""
    if ROOT not in queues:
        raise HierarchyError("the root queue does not exist")
    attrs = {
        name: Attr(q, guarantee=vec(q.guarantee), capability=capability_vec(q.capability)) for name, q in queues.items()
    }
    for name, attr in attrs.items():
        seen = [name]
        at = name
        while at != ROOT:
            parent = queues[at].parent or ROOT
            if parent not in queues:
                raise HierarchyError(f"queue {at} has a parent {parent} that does not exist")
            if parent in seen:
                raise HierarchyError(f"queue {name} is in a cycle of parents: {' -> '.join([*seen, parent])}")
            seen.append(parent)
            at = parent
        attr.ancestors = list(reversed(seen[1:]))
        if name != ROOT:
            attrs[queues[name].parent or ROOT].children.append(name)
    for name, attr in attrs.items():
        attr.deserved = vec(attr.queue.deserved)
        attr.allocated = vec(allocated.get(name))
        attr.request = dict(attr.allocated)
    for name, attr in attrs.items():  # what a queue holds, its ancestors hold
        for ancestor in attr.ancestors:
            attrs[ancestor].allocated = add(attrs[ancestor].allocated, vec(allocated.get(name)))
            attrs[ancestor].request = add(attrs[ancestor].request, vec(allocated.get(name)))
    for job in jobs.values():
        owner = attrs.get(job.queue)
        if owner is not None and owner.children:
            raise HierarchyError(f"job {job.namespace}/{job.name} is in queue {job.queue}, which is not a leaf")
    _add_jobs(attrs, jobs)
    root = attrs[ROOT]
    if not root.capability:
        root.capability = dict.fromkeys((*BASE, "gpu", *total), INF)
    root.real = dict(root.capability)
    _settle(attrs, root)
    for attr in attrs.values():
        attr.update_share()
    return attrs


def _settle(attrs: Mapping[str, Attr], parent: Attr) -> None:
    """Children's deserved at least their guarantee, capabilities inherited where unset, and their
    real capability: the parent's beyond the children's guarantees, plus their own (checkHierarchicalQueue)."""
    children = [attrs[c] for c in parent.children]
    total_guarantee: Vec = {}
    total_deserved: Vec = {}
    for child in children:
        child.deserved = vmax(child.deserved, child.guarantee)
        total_deserved = add(total_deserved, child.deserved)
        total_guarantee = add(total_guarantee, child.guarantee)
        for d, v in parent.capability.items():
            child.capability.setdefault(d, v)
    if parent.name == ROOT:
        parent.guarantee, parent.deserved = total_guarantee, total_deserved
    for child in children:
        child.real = min_dim(add(exceeded(parent.real, total_guarantee), child.guarantee), child.capability, INF)
        _settle(attrs, child)
