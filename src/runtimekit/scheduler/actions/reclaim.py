"""The `reclaim` action: a queue below its deserved share takes back resources from queues above
theirs. For starving jobs of queues that are not overused (and where every Preemptive plugin
agrees), evict tasks of other, reclaimable queues as the Reclaimable plugins allow, and hold the
freed resources for the reclaiming task (pipelined)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtimekit.scheduler.actions.evict import make_room, running_by_row
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


class Reclaim:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        on_row = running_by_row(ssn)
        if not on_row:
            return
        for queue in ssn.sorted_queues(ssn.queues.values()):
            if ssn.overused(queue):
                continue
            jobs = [
                j
                for j in ssn.jobs.values()
                if j.queue == queue.name and j.pending and ssn.job_valid(j).ok and ssn.job_starving(j)
            ]
            for job in ssn.sorted_jobs(jobs):
                stmt = ssn.statement()
                for task in ssn.sorted_tasks(job.pending):
                    if task.invalid or not ssn.preemptive(queue, task):
                        continue

                    def candidates(row: int, q: str = queue.name) -> list[TaskInfo]:
                        out = []
                        for t in on_row.get(row, []):
                            other = ssn.queues.get(ssn.jobs[t.job].queue)
                            if ssn.jobs[t.job].queue != q and other is not None and other.reclaimable:
                                out.append(t)
                        return out

                    rows = [r for r in ssn.candidate_rows().tolist() if r in on_row]
                    if make_room(ssn, stmt, task, rows, candidates, ssn.reclaimable, "reclaim"):
                        ssn.touched_jobs.add(job.key)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()


def build(arguments: Mapping[str, Any], context: BuildContext) -> Reclaim:
    no_arguments("reclaim", arguments)
    return Reclaim()
