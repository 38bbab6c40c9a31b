"""Shared by `preempt` and `reclaim`: for each starving job of a queue, make room for its tasks by
evicting victims on one node in a trial statement, lowest priority first, until the task fits (keep
the trial only if it does); the job's statement commits only if the job is then pipelined. As in
kube-scheduler, a task that fails for an unresolvable reason is not a preemptor, and nodes it
fails on for such a reason are not candidates.

Pods already terminating (evicted in an earlier session, or deleted by someone, and still in their
grace period) hold their resources until they are gone; as Volcano counts them in a node's future
idle room (idle + releasing - pipelined), their room is given back in the session's table once,
before the first eviction of the session (`terminating_rows`), and a task that fits in it is
pipelined there without evicting anything more. Without this, each session would evict one more
victim while the first is still terminating."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from functools import cmp_to_key

from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import OCCUPYING, JobInfo, QueueInfo, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.state import StateKey
from runtimekit.scheduler.framework.statement import Statement
from runtimekit.scheduler.framework.status import FitErrors, Status

log = logging.getLogger(__name__)
# whether the queue may take the task as the session stands (the Allocatable plugins)
QueueFits = Callable[[TaskInfo], bool]
# the rows whose terminating pods' room this session's table counts as free (written once a session)
TERMINATING_ROOM: StateKey[frozenset[int]] = StateKey("evict/terminating-room")


def terminating_rows(ssn: Session) -> frozenset[int]:
    """The rows where pods were terminating when the session opened; the first call of a session
    gives their room back in its table (a pipelined task may take it; nothing binds there, since the
    cluster cache still books them). Called before any eviction of the session's preempt or reclaim:
    a task evicted in this session gave its room back already, and its pod carries no deletion
    timestamp in the session's copy, which is how the two are told apart."""
    rows = ssn.state.get(TERMINATING_ROOM)
    if rows is not None:
        return rows
    found: set[int] = set()
    for task in ssn.each_task(lambda t: t.status is TaskStatus.RELEASING and t.placement is not None):
        pod = task.pod or {}
        if not (pod.get("metadata") or {}).get("deletionTimestamp") or task.node is None:
            continue
        if task.placement is not None and ssn.table.has_node(task.node):
            ssn.table.give(task.placement)
            found.add(ssn.table.row(task.node))
    rows = frozenset(found)
    ssn.state.write(TERMINATING_ROOM, rows)
    return rows


def never_preempts(task: TaskInfo) -> bool:
    """A pod whose `preemptionPolicy` is Never waits for room and evicts nothing (kube-scheduler's and
    Volcano's preempt and reclaim skip it); the other pods of its job may still take room."""
    return task.pod is not None and (task.pod.get("spec") or {}).get("preemptionPolicy") == "Never"


def running_by_row(ssn: Session) -> dict[int, list[TaskInfo]]:
    """Tasks holding resources, per node row (and the room of terminating pods counted as free)."""
    terminating_rows(ssn)
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
    room: Collection[int] = (),
    queue_fits: QueueFits | None = None,
) -> bool:
    """Pipeline the task on the first of the `room` rows (those with terminating pods) where it fits
    now, evicting nothing (Volcano's future idle); else try nodes in order, and on the first where
    evicting allowed victims lets the task fit, evict them and pipeline the task (all inside
    `stmt`). With `queue_fits` (preempt) the task must also fit its queue (its capability), counted
    after the evictions so far, and a node where both hold already takes it with no eviction
    (Volcano's `preemptorFitsOnNode`). True on success."""
    for row in rows:
        if row in room and _pipeline(ssn, stmt, task, row):
            return True
    for row in rows:
        candidates = candidates_on(row)
        victims = choose(task, candidates) if candidates else []
        if not victims:
            continue
        trial = ssn.statement()
        try:
            placed = _evict_until_fit(ssn, trial, task, row, victims, reason, queue_fits)
        except BaseException:  # leave the session as it was before this node's trial
            trial.discard()
            raise
        if placed:
            stmt.ops.extend(trial.ops)
            trial.ops.clear()
            return True
        trial.discard()
    return False


def _pipeline(ssn: Session, stmt: Statement, task: TaskInfo, row: int) -> bool:
    """Hold the row's room for the task (pipelined) if it fits there as the table stands."""
    if not fits_on(ssn, task, row):
        return False
    choice = ssn.allocate_devices(task, row)
    if isinstance(choice, Status):
        return False
    try:
        stmt.pipeline(task, row, choice)
    except LedgerError:
        return False
    return True


def _evict_until_fit(
    ssn: Session,
    trial: Statement,
    task: TaskInfo,
    row: int,
    victims: list[TaskInfo],
    reason: str,
    queue_fits: QueueFits | None = None,
) -> bool:
    """Evict victims on one node, lowest priority first, until the task fits (and, with `queue_fits`,
    fits its queue); pipeline it there. A task the node already takes evicts nothing, as Volcano's
    preempt and reclaim stop before their first victim when the node's future idle room takes the
    task (else a reclaim running before allocate evicts a pod for a task that fits): preempt
    pipelines it there (`preemptorFitsOnNode`); reclaim leaves it to allocate, which binds it in
    this session (pipelined, it would wait for victims that never go, each session again)."""
    if queue_fits is None:
        if fits_on(ssn, task, row):
            return True
    elif queue_fits(task) and _pipeline(ssn, trial, task, row):
        return True
    for victim in victim_order(ssn, task, victims):
        try:
            trial.evict(victim, reason)
        except LedgerError:
            continue
        if queue_fits is not None and not queue_fits(task):
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


def victim_order(ssn: Session, task: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
    """Victims as Volcano's victims queue orders them (`BuildVictimsPriorityQueue`): of one job, the
    lowest priority pod first, the newest among equals; of different queues, in the order the
    VictimQueueOrder plugins give for the task's queue (capacity's tree: the nearest relative queue
    first), else the queue last in queue order first; of different jobs of one queue, the job the
    JobOrder plugins put last first (the lowest priority job's, under the priority plugin), and
    where they do not tell the jobs apart, the pods' own order."""
    ordered = sorted(victims, key=lambda v: (v.priority, -v.created))
    if len(ordered) < 2 or len({v.job for v in ordered}) < 2:
        return ordered
    job = ssn.jobs.get(task.job)
    mine = ssn.queues.get(job.queue) if job is not None else None

    def compare(left: TaskInfo, right: TaskInfo) -> int:
        lj, rj = ssn.jobs.get(left.job), ssn.jobs.get(right.job)
        if left.job == right.job or lj is None or rj is None:
            return 0
        if lj.queue != rj.queue:
            lq, rq = ssn.queues.get(lj.queue), ssn.queues.get(rj.queue)
            if lq is None or rq is None or mine is None:
                return 0
            return ssn.victim_queue_order(lq, rq, mine) or -ssn.queue_order(lq, rq)
        for plugin in ssn.plugins.job_order.flat:
            if result := plugin.job_order(lj, rj):
                return -result
        return 0

    return sorted(ordered, key=cmp_to_key(compare))  # stable: pods the comparison ties keep their order


def evict_for_queue(
    ssn: Session,
    queue: QueueInfo,
    on_row: dict[int, list[TaskInfo]],
    may_evict: Callable[[JobInfo, TaskInfo], bool],
    choose: Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]],
    reason: str,
    task_ok: Callable[[TaskInfo], bool] = lambda _task: True,
    queue_fits: QueueFits | None = None,
) -> None:
    """Each starving job of `queue` (job, then task order) takes room from running tasks it `may_evict`
    and `choose` (the plugins' verdict) allows; a job's evictions stand only if it is then pipelined.
    `queue_fits`: see `make_room`."""
    jobs = [
        j
        for j in ssn.jobs.values()
        if j.queue == queue.name and j.pending and ssn.job_valid(j).ok and ssn.job_starving(j)
    ]
    terminating = terminating_rows(ssn)
    for job in ssn.sorted_jobs(jobs):
        stmt = ssn.statement()
        for task in ssn.sorted_tasks(job.pending):
            if task.invalid or not task_ok(task) or never_preempts(task):
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

            # a terminating pod's room serves the task first, if its queue may take it (Volcano's Allocatable)
            room = terminating if terminating and ssn.allocatable(queue, task) else frozenset()
            rows = [r for r in ssn.candidate_rows().tolist() if (r in on_row or r in room) and r not in hopeless]
            if ssn.observer is not None and reason == "preempt":
                ssn.observer.preemption_attempt()
            try:
                if make_room(ssn, stmt, task, rows, candidates, choose, reason, room, queue_fits):
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
