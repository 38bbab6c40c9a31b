"""The `backfill` action: place best-effort tasks (no request at all, extended resources
included) of admitted jobs on any node that passes the predicates, without gang checks (Volcano's
backfill). While backfill is configured, allocate leaves these tasks to it.

One difference from Volcano: a gang whose best-effort tasks use ResourceClaims (they ask for
devices, not for resources the ledger counts) is placed in one statement that commits only when the
gang is ready, and is given back whole otherwise, so a gang cut short never holds devices it cannot
use. Volcano's backfill has no gang check at all."""

from __future__ import annotations

import logging

from runtimekit.kube.semantics.podclaims import uses_claims
from runtimekit.model import LedgerError
from runtimekit.scheduler.actions.allocate import explain_unready_gang
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import JobInfo, TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.statement import Statement
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
            tasks = ssn.sorted_tasks(t for t in job.pending if t.best_effort)
            if job.min_member > 1 and any(uses_claims(t.pod) for t in tasks):
                ssn.touched_jobs.add(job.key)
                try:
                    _backfill_gang(ssn, job, tasks)
                except Exception as exc:  # this gang fails alone; the session goes on
                    log.exception("backfill: considering gang %s failed", job.key)
                    status = error(f"internal error: {type(exc).__name__}: {exc}").stamped("backfill")
                    for task in tasks:
                        job.fit_errors[task.key] = FitErrors(status=status)
                continue
            for task in tasks:
                ssn.touched_jobs.add(job.key)
                try:
                    _backfill(ssn, job, task)
                except Exception as exc:  # this pod fails alone; the session goes on
                    log.exception("backfill: considering %s/%s failed", task.namespace, task.name)
                    status = error(f"internal error: {type(exc).__name__}: {exc}").stamped("backfill")
                    job.fit_errors[task.key] = FitErrors(status=status)


def _backfill(ssn: Session, job: JobInfo, task: TaskInfo) -> None:
    stmt = ssn.statement()
    if _place(ssn, job, task, stmt):
        stmt.commit()


def _place(ssn: Session, job: JobInfo, task: TaskInfo, stmt: Statement) -> bool:
    """The task on the best node that passes the predicates, in `stmt`; whether it was placed."""
    row, errors = ssn.select(task)
    if row is None:
        job.fit_errors[task.key] = errors
        return False
    choice = ssn.allocate_devices(task, row)
    if isinstance(choice, Status):
        return False
    try:
        stmt.allocate(task, row, choice)
    except LedgerError:
        return False
    job.fit_errors.pop(task.key, None)
    return True


def _backfill_gang(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> None:
    """Every task in one statement; committed when the gang is ready, discarded otherwise."""
    stmt = ssn.statement()
    for task in tasks:
        _place(ssn, job, task, stmt)
    if ssn.job_ready(job):
        stmt.commit()
        return
    placed = job.ready_count() + job.waiting_count()
    stmt.discard()
    explain_unready_gang(ssn, job, tasks, placed)


def build(arguments: Arguments, context: BuildContext) -> Backfill:
    no_arguments("backfill", arguments, ("predicateErrorCacheEnable",))  # Volcano's speed switch: no effect here
    return Backfill()
