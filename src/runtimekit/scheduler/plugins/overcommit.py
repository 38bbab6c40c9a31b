"""`overcommit`: admit pod groups (enqueue) while the resources they need fit in the cluster's
idle resources scaled by `overcommit-factor` (default 1.2; below 1, a warning and the default, as
in Volcano), so that the pending queue does not grow far beyond what can run. Implements
JobEnqueueable and JobEnqueued."""

from __future__ import annotations

from dataclasses import dataclass

from runtimekit.scheduler.framework.arguments import Arguments, parse_arguments
from runtimekit.scheduler.framework.info import JobInfo, Resources
from runtimekit.scheduler.framework.interfaces import JobEnqueueable, JobEnqueued, Plugin, Vote
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.view import SessionView

DEFAULT_FACTOR = 1.2


@dataclass(frozen=True)
class OvercommitArgs:
    overcommit_factor: float = DEFAULT_FACTOR


class Overcommit(Plugin, JobEnqueueable, JobEnqueued):
    name = "overcommit"

    def __init__(self, args: OvercommitArgs) -> None:
        self.args = args
        self.idle = Resources()
        self.inqueue = Resources()

    def on_session_open(self, ssn: SessionView) -> None:
        total: Resources = ssn.snapshot.capacity
        used = Resources()
        for allocated in ssn.snapshot.queue_allocated.values():
            used = used + allocated
        f = self.args.overcommit_factor
        self.idle = Resources(
            int(total.cpu * f) - used.cpu, int(total.memory * f) - used.memory, int(total.gpu * f) - used.gpu
        )
        self.inqueue = Resources()
        for job in ssn.jobs.values():
            if job.phase == "Inqueue" and job.min_resources is not None:
                self.inqueue = self.inqueue + job.min_resources

    def job_enqueueable(self, job: JobInfo) -> Vote:
        if job.min_resources is None:
            return Vote.PERMIT
        return Vote.PERMIT if (self.inqueue + job.min_resources).fits_in(self.idle) else Vote.REJECT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.min_resources is not None:
            self.inqueue = self.inqueue + job.min_resources


def build(arguments: Arguments, context: BuildContext) -> Overcommit:
    args = parse_arguments(OvercommitArgs, "overcommit", arguments, {"overcommit-factor": "overcommit_factor"})
    if args.overcommit_factor < 1.0:  # Volcano warns and takes its default; a conf it runs must run here
        context.warn(
            f"overcommit: overcommit-factor {args.overcommit_factor} is below 1; using the default {DEFAULT_FACTOR}"
        )
        args = OvercommitArgs()
    return Overcommit(args)
