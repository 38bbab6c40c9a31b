"""Shared by `preempt` and `reclaim`: for each starving job of a queue, make room for its tasks by
evicting victims on one node in a trial statement, lowest priority first, until the task fits (keep
the trial only if it does); the job's statement commits only if the job is then pipelined. As in
kube-scheduler, a task that fails for an unresolvable reason is not a preemptor, and nodes it
fails on for such a reason are not candidates."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import OCCUPYING, JobInfo, QueueInfo, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.statement import Statement
from runtimekit.scheduler.framework.status import FitErrors, Status

log = logging.getLogger(__name__)


def running_by_row(ssn: Session) -> dict[int, list[TaskInfo]]:
    """Tasks holding resources, per node row."""
    out: dict[int, list[TaskInfo]] = {}
    for task in ssn.each_task(lambda t: t.status in OCCUPYING and t.status is not TaskStatus.RELEASING):
        if task.node is not None and ssn.table.has_node(task.node):
            out.setdefault(ssn.table.row(task.node), []).append(task)
    return out


def fits_on(ssn: Session, task: TaskInfo, row: int) -> bool:
    import numpy as np

    rows = np.array([row], np.int64)
    errors = FitErrors()
    return bool(ssn.predicate(task, ssn.resource_fit(task, rows, errors), errors).size)


def make_room(
    ssn: Session,
    stmt: Statement,
    task: TaskInfo,
    rows: Sequence[int],
    candidates_on: Callable[[int], list[TaskInfo]],
    choose: Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]],
    reason: str,
) -> bool:
    """Try nodes in order; on the first where evicting allowed victims lets the task fit, evict
    them and pipeline the task (all inside `stmt`). True on success."""
    for row in rows:
        victims = choose(task, candidates_on(row))
        if not victims:
            continue
        trial = ssn.statement()
        try:
            placed = _evict_until_fit(ssn, trial, task, row, victims, reason)
        except BaseException:  # leave the session as it was before this node's trial
            trial.discard()
            raise
        if placed:
            stmt.ops.extend(trial.ops)
            trial.ops.clear()
            return True
        trial.discard()
    return False


def _evict_until_fit(
    ssn: Session, trial: Statement, task: TaskInfo, row: int, victims: list[TaskInfo], reason: str
) -> bool:
    """Evict victims on one node, lowest priority first, until the task fits; pipeline it there."""
    for victim in sorted(victims, key=lambda v: (v.priority, -v.created)):
        try:
            trial.evict(victim, reason)
        except LedgerError:
            continue
        if fits_on(ssn, task, row):
            choice = ssn.allocate_devices(task, row)
            if isinstance(choice, Status):
                continue
            try:
                trial.pipeline(task, row, choice)
            except LedgerError:
                continue
            return True
    return False


def evict_for_queue(
    ssn: Session,
    queue: QueueInfo,
    on_row: dict[int, list[TaskInfo]],
    may_evict: Callable[[JobInfo, TaskInfo], bool],
    choose: Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]],
    reason: str,
    task_ok: Callable[[TaskInfo], bool] = lambda _task: True,
) -> None:
    """Each starving job of `queue` (job, then task order) takes room from running tasks it `may_evict`
    and `choose` (the plugins' verdict) allows; a job's evictions stand only if it is then pipelined."""
    jobs = [
        j
        for j in ssn.jobs.values()
        if j.queue == queue.name and j.pending and ssn.job_valid(j).ok and ssn.job_starving(j)
    ]
    for job in ssn.sorted_jobs(jobs):
        stmt = ssn.statement()
        for task in ssn.sorted_tasks(job.pending):
            if task.invalid or not task_ok(task):
                continue
            errors = job.fit_errors.get(task.key)
            if not isinstance(errors, FitErrors):  # no attempt this session yet: the predicates say
                _, errors = ssn.feasible(task)
            if not errors.resolvable:  # fails whatever is evicted (kube-scheduler: no preemption)
                continue
            hopeless = errors.unresolvable_rows()

            def candidates(row: int, job: JobInfo = job) -> list[TaskInfo]:
                # a victim an earlier task of this session evicted gave its resources back once already
                return [t for t in on_row.get(row, []) if t.status is not TaskStatus.RELEASING and may_evict(job, t)]

            rows = [r for r in ssn.candidate_rows().tolist() if r in on_row and r not in hopeless]
            if ssn.observer is not None and reason == "preempt":
                ssn.observer.preemption_attempt()
            try:
                if make_room(ssn, stmt, task, rows, candidates, choose, reason):
                    ssn.touched_jobs.add(job.key)
            except Exception:  # this pod gives up its turn alone; the session goes on
                log.exception("%s: making room for %s/%s failed", reason, task.namespace, task.name)
        if ssn.job_pipelined(job):
            victims = sum(1 for op in stmt.ops if op.kind == "evict")
            stmt.commit()
            if victims and ssn.observer is not None:
                ssn.observer.evicted(reason, victims)
        else:
            stmt.discard()
