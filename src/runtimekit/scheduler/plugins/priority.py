"""`priority`: higher-priority jobs and tasks first; lower-priority pods may be preempted.

Implements JobOrder, TaskOrder, Preemptable and JobStarving (a job is starving while some of its
tasks are neither placed nor waiting). A task's priority is its pod's `spec.priority` (from its
PriorityClass); a job's is its PodGroup's PriorityClass, as Volcano's cache sets it
(`cache/priorities.py`), and a pod without a PodGroup is a job of its own priority."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, JobKey, TaskInfo
from runtimekit.scheduler.framework.interfaces import JobOrderKey, JobStarving, Plugin, Preemptable, TaskOrder
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import no_arguments


class Priority(Plugin, JobOrderKey, TaskOrder, Preemptable, JobStarving):
    name = "priority"

    def __init__(self) -> None:
        self._jobs: Mapping[JobKey, JobInfo] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        self._jobs = ssn.jobs

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        return right.priority - left.priority

    def job_order_key(self, job: JobInfo) -> float:
        return -job.priority

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        return right.priority - left.priority

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        mine = self._jobs.get(preemptor.job)
        own_priority = mine.priority if mine else preemptor.priority
        victims = []
        for task in candidates:
            if task.job == preemptor.job:
                if task.priority < preemptor.priority:
                    victims.append(task)
                continue
            job = self._jobs.get(task.job)
            if (job.priority if job else task.priority) < own_priority:
                victims.append(task)
        return victims

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_count() + job.waiting_count() < len(job.tasks)


def build(arguments: Arguments, context: BuildContext) -> Priority:
    no_arguments("priority", arguments)
    return Priority()
