"""The `preempt` action: for starving jobs (in queue, job and task order), evict lower-priority
tasks of other jobs in the same queue (as the Preemptable plugins allow) to make room, and hold the
freed resources for the preemptor (pipelined; it binds in a later session once the victims are
gone). The preemptor must fit its queue too (the Allocatable plugins: a capability), counted after
the evictions, as Volcano's preempt checks it on each node. The job's statement commits only if the
job is then pipelined (gang-complete)."""

from __future__ import annotations

from runtimekit.scheduler.actions.evict import evict_for_queue, running_by_row
from runtimekit.scheduler.framework.action import NeedsRunning
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, QueueInfo, TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


class Preempt(NeedsRunning):
    name = "preempt"
    needs_running = True  # victims are running pods

    def execute(self, ssn: Session) -> None:
        on_row = running_by_row(ssn)
        if not on_row:
            return

        def may_evict(job: JobInfo, running: TaskInfo) -> bool:
            return running.job != job.key and ssn.jobs[running.job].queue == job.queue and running.preemptable

        for queue in ssn.sorted_queues(ssn.queues.values()):

            def queue_fits(task: TaskInfo, queue: QueueInfo = queue) -> bool:
                return ssn.allocatable(queue, task)

            evict_for_queue(ssn, queue, on_row, may_evict, ssn.preemptable, "preempt", queue_fits=queue_fits)


def build(arguments: Arguments, context: BuildContext) -> Preempt:
    no_arguments(
        "preempt",
        arguments,
        (
            "predicateErrorCacheEnable",
            "topologyAwarePreemptWorkerNum",  # Volcano's parallel workers for it: one loop here
            "enableTopologyAwarePreemption",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
            "maxCandidateNodesAbsolute",
        ),
    )
    return Preempt()
