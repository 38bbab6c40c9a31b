"""`gang`: all or nothing for pod groups. A job is ready when `minMember` of its tasks are placed,
and, where the PodGroup's `minTaskMember` sums to no more than `minMember`, as many of each task
role as it names (Volcano's `CheckTaskValid`/`CheckTaskReady`/`CheckTaskPipelined`); nothing of it
binds until then (the allocate action commits its statement only when ready). A pod without a
PodGroup is a group of one.

Implements JobValid (enough tasks exist to reach minMember), JobReady, JobPipelined, JobOrder
(jobs not yet ready first), JobStarving, Preemptable and Reclaimable (a victim may be taken only
if its own gang stays at or above minMember)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import OCCUPYING, READY, JobInfo, JobKey, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.interfaces import (
    JobOrder,
    JobPipelined,
    JobReady,
    JobStarving,
    JobValid,
    Plugin,
    Preemptable,
    Reclaimable,
    Vote,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import SUCCESS, Status, unschedulable
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments

VALID = frozenset({TaskStatus.PENDING, *OCCUPYING, TaskStatus.SUCCEEDED})
PLACED = frozenset({*READY, TaskStatus.PIPELINED})


class Gang(Plugin, JobValid, JobReady, JobPipelined, JobOrder, JobStarving, Preemptable, Reclaimable):
    name = "gang"

    def __init__(self) -> None:
        self._jobs: Mapping[JobKey, JobInfo] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        self._jobs = ssn.jobs

    def job_valid(self, job: JobInfo) -> Status:
        short = job.roles_short(VALID)  # Volcano's CheckTaskValid, before the gang's count
        if short:
            role, have, need = short[0]
            return unschedulable(f"{have}/{need} pods of task {role!r} exist (minTaskMember); waiting for the rest")
        valid = sum(1 for t in job.tasks.values() if t.status in VALID)
        if valid < job.min_member:
            return unschedulable(f"{valid}/{job.min_member} tasks of the gang exist; waiting for the rest")
        return SUCCESS

    def job_ready(self, job: JobInfo) -> bool:
        return job.ready_count() >= job.min_member and not job.roles_short(READY)

    def job_pipelined(self, job: JobInfo) -> Vote:
        occupied = job.ready_count() + job.waiting_count()
        if occupied < job.min_member or job.roles_short(PLACED):
            return Vote.REJECT
        return Vote.PERMIT

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        left_ready, right_ready = self.job_ready(left), self.job_ready(right)
        if left_ready == right_ready:
            return 0
        return 1 if left_ready else -1

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_count() + job.waiting_count() < job.min_member

    def _victims(self, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        taken: dict[str, int] = {}
        victims = []
        for task in candidates:
            job = self._jobs.get(task.job)
            if job is None or job.min_member <= 1:
                victims.append(task)
                continue
            occupied = job.ready_count() - taken.get(job.key, 0)
            if occupied - 1 >= job.min_member:
                taken[job.key] = taken.get(job.key, 0) + 1
                victims.append(task)
        return victims

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._victims(candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        return self._victims(candidates)


def build(arguments: Arguments, context: BuildContext) -> Gang:
    no_arguments("gang", arguments)
    return Gang()
