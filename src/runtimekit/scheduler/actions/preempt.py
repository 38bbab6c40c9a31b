"""The `preempt` action: for starving jobs (in queue, job and task order), evict lower-priority
tasks of other jobs in the same queue (as the Preemptable plugins allow) to make room, and hold the
freed resources for the preemptor (pipelined; it binds in a later session once the victims are
gone). The job's statement commits only if the job is then pipelined (gang-complete)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtimekit.scheduler.actions.evict import make_room, running_by_row
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.common import no_arguments


class Preempt:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        on_row = running_by_row(ssn)
        if not on_row:
            return
        for queue in ssn.sorted_queues(ssn.queues.values()):
            jobs = [
                j
                for j in ssn.jobs.values()
                if j.queue == queue.name and j.pending and ssn.job_valid(j).ok and ssn.job_starving(j)
            ]
            for job in ssn.sorted_jobs(jobs):
                stmt = ssn.statement()
                for task in ssn.sorted_tasks(job.pending):
                    if task.invalid:
                        continue

                    def candidates(row: int, job_key: str = job.key, q: str = queue.name) -> list[TaskInfo]:
                        return [
                            t
                            for t in on_row.get(row, [])
                            if t.job != job_key and ssn.jobs[t.job].queue == q and t.preemptable
                        ]

                    rows = [r for r in ssn.candidate_rows().tolist() if r in on_row]
                    if make_room(ssn, stmt, task, rows, candidates, ssn.preemptable, "preempt"):
                        ssn.touched_jobs.add(job.key)
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()


def build(arguments: Mapping[str, Any], context: BuildContext) -> Preempt:
    no_arguments(
        "preempt",
        arguments,
        (
            "predicateErrorCacheEnable",
            "enableTopologyAwarePreemption",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
            "maxCandidateNodesAbsolute",
        ),
    )
    return Preempt()
