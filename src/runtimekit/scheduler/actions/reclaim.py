"""The `reclaim` action: a queue below its deserved share takes back resources from queues above
theirs. For starving jobs of queues that are not overused (and where every Preemptive plugin
agrees), evict tasks of other, reclaimable queues as the Reclaimable plugins allow, and hold the
freed resources for the reclaiming task (pipelined)."""

from __future__ import annotations

from runtimekit.scheduler.actions.evict import evict_for_queue, running_by_row
from runtimekit.scheduler.framework.action import NeedsRunning
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, QueueInfo, TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


class Reclaim(NeedsRunning):
    name = "reclaim"
    needs_running = True  # victims are running pods

    def execute(self, ssn: Session) -> None:
        on_row = running_by_row(ssn)
        if not on_row:
            return

        def may_evict(job: JobInfo, running: TaskInfo) -> bool:
            other = ssn.queues.get(ssn.jobs[running.job].queue)
            # a pod marked not preemptable is never a victim, of reclaim either (as Volcano's reclaim)
            return other is not None and other.name != job.queue and other.reclaimable and running.preemptable

        for queue in ssn.sorted_queues(ssn.queues.values()):
            if ssn.overused(queue):
                continue

            def preemptive(task: TaskInfo, queue: QueueInfo = queue) -> bool:
                return ssn.preemptive(queue, task)

            evict_for_queue(ssn, queue, on_row, may_evict, ssn.reclaimable, "reclaim", task_ok=preemptive)


def build(arguments: Arguments, context: BuildContext) -> Reclaim:
    no_arguments("reclaim", arguments, ("predicateErrorCacheEnable",))  # Volcano's speed switch: no effect here
    return Reclaim()
