"""`gang`: all or nothing for pod groups. A job is ready when `minMember` of its tasks are placed,
and, where the PodGroup's `minTaskMember` sums to no more than `minMember`, as many of each task
role as it names (Volcano's `CheckTaskValid`/`CheckTaskReady`/`CheckTaskPipelined`); nothing of it
binds until then (the allocate action commits its statement only when ready). A pod without a
PodGroup is a group of one.

Implements JobValid (enough tasks exist to reach minMember), JobReady, JobPipelined, JobOrder,
JobStarving, JobRelease, Preemptable and Reclaimable (a victim may be taken only if its own gang
stays at or above minMember).

JobOrder is Volcano's (jobs not yet ready before ready ones), and one step more: among jobs not
ready, a gang that already holds placed members (bound or running: a scheduler stopped while it
bound the gang, or a bind that failed half way) goes before one that holds none. Volcano leaves
that tie to the next plugin, and drf, which ranks by what a job holds, then puts the partly bound
gang last, so that competitors take the room it needs while its members sit on their GPUs. Only
such gangs are ordered differently: a gang binds all at once, so in normal running no job is
partly placed.

JobRelease bounds what a partly placed gang may hold: once it has failed to complete for
`partialHoldSeconds` (default 120; 0: never give back), allocate evicts its placed members so that
their GPUs come back; the gang's controller makes them again and the gang is then placed whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, parse_arguments
from runtimekit.scheduler.framework.info import OCCUPYING, READY, JobInfo, JobKey, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.interfaces import (
    JobOrderKey,
    JobPipelined,
    JobReady,
    JobRelease,
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

NAME = "gang"
VALID = frozenset({TaskStatus.PENDING, *OCCUPYING, TaskStatus.SUCCEEDED})
PLACED = frozenset({*READY, TaskStatus.PIPELINED})
HOLDING = READY & OCCUPYING  # placed and holding resources (a succeeded member holds nothing)
FORGET_AFTER_S = 600.0  # a partly placed gang not seen failing for this long (beyond its hold) is forgotten


@dataclass(frozen=True)
class GangArgs:
    partial_hold_seconds: float = 120.0

    def __post_init__(self) -> None:
        if self.partial_hold_seconds < 0:
            raise ArgumentError(
                f"{NAME}: partialHoldSeconds must be 0 (never give back) or more, got {self.partial_hold_seconds}"
            )


class Gang(Plugin, JobValid, JobReady, JobPipelined, JobOrderKey, JobStarving, JobRelease, Preemptable, Reclaimable):
    name = NAME

    def __init__(self, args: GangArgs | None = None) -> None:
        self.args = args or GangArgs()
        self._jobs: Mapping[JobKey, JobInfo] = {}
        self._now = 0.0
        # partly placed gangs that failed to complete: (first failure, latest failure), session time
        self._partial: dict[JobKey, tuple[float, float]] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        self._jobs = ssn.jobs
        self._now = now = ssn.now
        if self._partial:
            for key, (_, latest) in list(self._partial.items()):
                job = ssn.jobs.get(key)
                completed = job is not None and not 0 < _holding(job) < job.min_member
                if completed or now - latest > self.args.partial_hold_seconds + FORGET_AFTER_S:
                    del self._partial[key]

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
        left_placed, right_placed = _placed(left), _placed(right)
        left_ready, right_ready = left_placed[0] >= left.min_member, right_placed[0] >= right.min_member
        if left_ready != right_ready:
            return 1 if left_ready else -1
        if left_ready:
            return 0
        left_holds, right_holds = left_placed[1] > 0, right_placed[1] > 0  # partly placed first
        if left_holds == right_holds:
            return 0
        return -1 if left_holds else 1

    def job_order_key(self, job: JobInfo) -> float:
        ready, holding = _placed(job)
        if ready >= job.min_member:
            return 2.0
        return 0.0 if holding > 0 else 1.0  # not ready: those holding resources first

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_count() + job.waiting_count() < job.min_member

    def job_release(self, job: JobInfo) -> str | None:
        held = _holding(job)
        if not 0 < held < job.min_member or not self.args.partial_hold_seconds:
            self._partial.pop(job.key, None)
            return None
        first, _ = self._partial.get(job.key, (self._now, self._now))
        held_for = self._now - first
        if held_for < self.args.partial_hold_seconds:
            self._partial[job.key] = (first, self._now)
            return None
        del self._partial[job.key]
        return (
            f"gang {job.namespace}/{job.name} held {held}/{job.min_member} members for {held_for:.0f}s "
            f"without placing the rest; giving their resources back so that the gang is placed whole later"
        )

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


def _placed(job: JobInfo) -> tuple[int, int]:
    """(tasks counting towards minMember, those of them holding resources), in one pass."""
    ready = holding = 0
    for task in job.tasks.values():
        status = task.status
        if status in READY:
            ready += 1
            if status in HOLDING:
                holding += 1
    return ready, holding


def _holding(job: JobInfo) -> int:
    return _placed(job)[1]


def build(arguments: Arguments, context: BuildContext) -> Gang:
    del context
    return Gang(parse_arguments(GangArgs, NAME, arguments))
