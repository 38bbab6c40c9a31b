"""The `backfill` action: place best-effort tasks (no request at all, extended resources
included) of admitted jobs on any node that passes the predicates, without gang checks (Volcano's
backfill). While backfill is configured, allocate leaves these tasks to it."""

from __future__ import annotations

import logging

from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import FitErrors, Status, error
from runtimekit.scheduler.plugins.common import no_arguments

log = logging.getLogger(__name__)


class Backfill:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        for job in ssn.sorted_jobs(ssn.jobs.values()):
            if job.phase == "Pending" and "enqueue" in ssn.enabled_actions:
                continue
            if not ssn.job_valid(job).ok:
                continue
            for task in ssn.sorted_tasks(t for t in job.pending if t.best_effort):
                ssn.touched_jobs.add(job.key)
                try:
                    _backfill(ssn, job, task)
                except Exception as exc:  # this pod fails alone; the session goes on
                    log.exception("backfill: considering %s/%s failed", task.namespace, task.name)
                    status = error(f"internal error: {type(exc).__name__}: {exc}").stamped("backfill")
                    job.fit_errors[task.key] = FitErrors(status=status)


def _backfill(ssn: Session, job: JobInfo, task: TaskInfo) -> None:
    row, errors = ssn.select(task)
    if row is None:
        job.fit_errors[task.key] = errors
        return
    choice = ssn.allocate_devices(task, row)
    if isinstance(choice, Status):
        return
    stmt = ssn.statement()
    try:
        stmt.allocate(task, row, choice)
    except LedgerError:
        return
    stmt.commit()
    job.fit_errors.pop(task.key, None)


def build(arguments: Arguments, context: BuildContext) -> Backfill:
    no_arguments("backfill", arguments)
    return Backfill()
