"""The `enqueue` action: admit pending pod groups (phase Pending -> Inqueue) queue by queue, one
job at a time round-robin, when every plugin's JobEnqueueable allows (e.g. proportion: the queue
is open and the group's minResources fit its capability; overcommit: they fit the idle cluster).
Only Inqueue jobs are considered by allocate. A pod without a PodGroup is admitted directly."""

from __future__ import annotations

from runtimekit.scheduler.actions.ordering import OrderedQueue
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        by_queue: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if job.phase == "Pending" and queue is not None and queue.state == "Open":
                by_queue.setdefault(job.queue, []).append(job)
        queues = OrderedQueue(ssn.queue_order, [ssn.queues[name] for name in by_queue], ssn.queue_key)
        jobs = {name: OrderedQueue(ssn.job_order, items, ssn.job_key) for name, items in by_queue.items()}
        while queues:
            queue = queues.pop()
            pending = jobs[queue.name]
            job = pending.pop()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = "Inqueue"
                ssn.touched_jobs.add(job.key)
            if pending:
                queues.push(queue)


def build(arguments: Arguments, context: BuildContext) -> Enqueue:
    no_arguments("enqueue", arguments)
    return Enqueue()
