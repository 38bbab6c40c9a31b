"""`sla`: a job that has waited longer than its waiting time goes first and is admitted at once
(Volcano's sla plugin).

A job's waiting time is its PodGroup's annotation `volcano.sh/sla-waiting-time` or `sla-waiting-time`
(a Go duration: `90s`, `1h30m`), else the plugin's argument `sla-waiting-time`; a job with neither
has no SLA. Implements:

- JobOrder: jobs with an SLA before jobs without; among them the earlier deadline (creation time +
  waiting time) first;
- JobEnqueueable and JobPipelined: Permit once the job has waited its time (the tier with this Permit
  decides, so an sla in the first tier admits the job whatever later tiers say; a Reject in the same
  tier still refuses), else abstain.
"""

from __future__ import annotations

import math

from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, go_duration
from runtimekit.scheduler.framework.info import JobInfo
from runtimekit.scheduler.framework.interfaces import JobEnqueueable, JobOrderKey, JobPipelined, Plugin, Vote
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView

NAME = "sla"
ARGUMENT = "sla-waiting-time"


class Sla(Plugin, JobOrderKey, JobEnqueueable, JobPipelined):
    name = NAME

    def __init__(self, waiting_time: float | None) -> None:
        self.waiting_time = waiting_time  # seconds; None: only jobs that set their own have an SLA
        self.now = 0.0

    def on_session_open(self, ssn: SessionView) -> None:
        self.now = ssn.now

    def _wait(self, job: JobInfo) -> float | None:
        return job.waiting_time if job.waiting_time is not None else self.waiting_time

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        lw, rw = self._wait(left), self._wait(right)
        if lw is None or rw is None:
            return 0 if lw is None and rw is None else (1 if lw is None else -1)
        ld, rd = left.created + lw, right.created + rw
        return -1 if ld < rd else (1 if ld > rd else 0)

    def job_order_key(self, job: JobInfo) -> float:
        wait = self._wait(job)
        return math.inf if wait is None else job.created + wait  # jobs without a waiting time go last

    def _overdue(self, job: JobInfo) -> Vote:
        wait = self._wait(job)
        if wait is None or self.now - job.created < wait:
            return Vote.ABSTAIN
        return Vote.PERMIT

    def job_enqueueable(self, job: JobInfo) -> Vote:
        return self._overdue(job)

    def job_pipelined(self, job: JobInfo) -> Vote:
        return self._overdue(job)


def build(arguments: Arguments, context: BuildContext) -> Sla:
    unknown = sorted(set(arguments) - {ARGUMENT, f"{NAME}.{ARGUMENT}"})
    if unknown:
        raise ArgumentError(f"{NAME}: unknown argument {unknown[0]!r}; known: {ARGUMENT}")
    raw = arguments.get(ARGUMENT, arguments.get(f"{NAME}.{ARGUMENT}"))
    if raw is None:
        return Sla(None)
    if not isinstance(raw, str):
        raise ArgumentError(f"{NAME}: {ARGUMENT} must be a duration such as 90s or 1h30m, got {raw!r}")
    try:
        seconds = go_duration(raw)
    except ArgumentError as exc:
        raise ArgumentError(f"{NAME}: {ARGUMENT}: {exc}") from exc
    if seconds <= 0:
        raise ArgumentError(f"{NAME}: {ARGUMENT} must be more than 0, got {raw!r}")
    return Sla(seconds)
