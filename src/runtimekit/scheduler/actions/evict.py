"""Shared by `preempt` and `reclaim`: make room for a task on one node by evicting victims in a
trial statement, lowest priority first, until the task fits; keep the trial only if it does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import OCCUPYING, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.statement import Statement
from runtimekit.scheduler.framework.status import FitErrors, Status


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
        placed = False
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
                placed = True
                break
        if placed:
            stmt.ops.extend(trial.ops)
            trial.ops.clear()
            return True
        trial.discard()
    return False
