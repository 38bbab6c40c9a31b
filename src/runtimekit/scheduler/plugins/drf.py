"""`drf`: dominant resource fairness between jobs. A job's share is its largest fraction of the
cluster's CPU, memory or GPU; jobs with the smaller share go first, and a task may preempt tasks of
jobs whose share stays above its own. Shares follow allocations within the session.

Implements JobOrder, Preemptable and EventHandler. Volcano's `enableHierarchy` (hierarchical
DRF across namespaces) is not supported and refused at start-up."""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, Resources, TaskInfo
from runtimekit.scheduler.framework.interfaces import EventHandler, JobOrderKey, Plugin, Preemptable
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments


def dominant_share(used: Resources, total: Resources) -> float:
    """The largest fraction of any dimension of the cluster (scalars included) that `used` holds."""
    return max((amount / total.get(dim) for dim, amount in used.items() if total.get(dim) > 0), default=0.0)


class Drf(Plugin, JobOrderKey, Preemptable, EventHandler):
    name = "drf"

    def __init__(self) -> None:
        self.total = Resources()
        self.allocated: dict[str, Resources] = {}
        # each job's dominant share, worked out once per change of its allocation: ordering the
        # thousands of pending jobs (a pod each, as a rule) asks for it per comparison
        self._shares: dict[str, float] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        self.total = ssn.snapshot.capacity
        self.allocated = {key: job.allocated() for key, job in ssn.jobs.items()}
        self._shares = {}

    def share(self, job: str) -> float:
        share = self._shares.get(job)
        if share is None:
            share = self._shares[job] = dominant_share(self.allocated.get(job, Resources()), self.total)
        return share

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        a, b = self.share(left.key), self.share(right.key)
        return -1 if a < b else (1 if a > b else 0)

    def job_order_key(self, job: JobInfo) -> float:
        return self.share(job.key)

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        mine = self.allocated.get(preemptor.job, Resources()) + preemptor.resources
        own_share = dominant_share(mine, self.total)
        victims = []
        for task in candidates:
            theirs = self.allocated.get(task.job, Resources()) - task.resources
            if own_share < dominant_share(theirs, self.total) or task.job == preemptor.job:
                victims.append(task)
        return victims

    def on_allocate(self, task: TaskInfo) -> None:
        self.allocated[task.job] = self.allocated.get(task.job, Resources()) + task.resources
        self._shares.pop(task.job, None)

    def on_deallocate(self, task: TaskInfo) -> None:
        self.allocated[task.job] = self.allocated.get(task.job, Resources()) - task.resources
        self._shares.pop(task.job, None)


def build(arguments: Arguments, context: BuildContext) -> Drf:
    no_arguments("drf", arguments)
    return Drf()
