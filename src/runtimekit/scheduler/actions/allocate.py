"""The `allocate` action: queues in order (skipping overused ones), their jobs in order, each job's
pending tasks in order; every task goes through predicates, scores and device allocation inside
one statement per job, which commits when the job is ready (gang), stays held when it is
pipelined, and is discarded otherwise. A task that fits nowhere stops the job's turn only when the
gang can no longer be met without it (Volcano's `NeedContinueAllocating`); the other pods of its
task role are not tried again. A job that became ready with tasks left goes back in line so that
other jobs get a turn (Volcano's allocate). A gang left unready that holds bound members has them
evicted once a plugin says it has held them long enough (`JobRelease`: gang's `partialHoldSeconds`)."""

from __future__ import annotations

import logging
import time
from collections import Counter

from runtimekit.model import LedgerError
from runtimekit.scheduler.actions.ordering import OrderedQueue
from runtimekit.scheduler.actions.shortfall import about_room, gang_shortfall
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.info import READY, JobInfo, QueueInfo, Resources, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.statement import ReserveError, Statement
from runtimekit.scheduler.framework.status import Code, FitErrors, Status, error

log = logging.getLogger(__name__)
BOUND = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})


class Allocate:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        by_queue = eligible_jobs(ssn)
        if len(by_queue) == 1:
            only = next(iter(by_queue.values()))
            if len(only) == 1:  # one job in one queue (a pod of its own, as a rule): nothing to order
                queue, job = ssn.queues[only[0].queue], only[0]
                while not ssn.overused(queue):
                    if not allocate_job(ssn, queue, job):
                        return
                _queue_overused(ssn, queue, [job])
                return
        queues = OrderedQueue(ssn.queue_order, [ssn.queues[q] for q in by_queue], ssn.queue_key)
        job_heaps = {q: OrderedQueue(ssn.job_order, jobs, ssn.job_key) for q, jobs in by_queue.items()}
        while queues:
            queue = queues.pop()
            jobs = job_heaps[queue.name]
            if ssn.overused(queue):
                _queue_overused(ssn, queue, [jobs.pop() for _ in range(len(jobs))])
                continue
            if not jobs:
                continue
            job = jobs.pop()
            if allocate_job(ssn, queue, job):
                jobs.push(job)
            if jobs:
                queues.push(queue)


def eligible_jobs(ssn: Session) -> dict[str, list[JobInfo]]:
    """Jobs with pending tasks that may be scheduled now, grouped by queue."""
    wait_for_enqueue = "enqueue" in ssn.enabled_actions
    grouped: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if not job.pending:
            continue
        if wait_for_enqueue and job.phase == "Pending":  # enqueue did not admit it: say why it waits
            _fail_all(ssn, job, Status(Code.UNSCHEDULABLE, (_not_admitted(ssn, job),), "enqueue"))
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            _fail_all(ssn, job, Status(Code.UNSCHEDULABLE, (f"queue {job.queue!r} does not exist",), "allocate"))
            continue
        if queue.state != "Open":  # Closed or Closing: what runs keeps running, nothing new starts
            _fail_all(ssn, job, Status(Code.UNSCHEDULABLE, (f"queue {queue.name} is {queue.state}",), "allocate"))
            continue
        status = ssn.job_valid(job)
        if not status.ok:
            _fail_all(ssn, job, status)
            continue
        grouped.setdefault(job.queue, []).append(job)
    return grouped


def _queue_overused(ssn: Session, queue: QueueInfo, jobs: list[JobInfo]) -> None:
    """Jobs left waiting because their queue holds its deserved share: say so on their pods, unless
    no node could take a pod anyway. A queue whose pods fill the cluster is overused as soon as
    nothing is left to deserve (a pod asking no CPU or memory adds nothing to those dimensions), so
    on a full cluster of one queue every pod would read "overused" where the nodes' reason (a card's
    memory or cores, as HAMi words it) is the one that lasts and the one to act on. The predicates
    run for that only for a pod asking more of some resource than the whole cluster has idle (as on a
    full cluster; a backlog in a queue at its share on a cluster with room costs no predicate run),
    once per task role (its pods are alike); nothing is placed, so placements stay those of Volcano,
    which skips an overused queue."""
    status = Status(Code.UNSCHEDULABLE, (f"queue {queue.name} is overused (it holds its deserved share)",), "allocate")
    nodes = int(ssn.candidate_rows().size)
    idle = _idle(ssn)
    for job in jobs:
        ssn.touched_jobs.add(job.key)
        by_role: dict[str, FitErrors] = {}
        for task in job.pending:
            if task.key in job.fit_errors:  # a reason found earlier stays
                continue
            if task.invalid:  # its own reason outlasts any queue's
                job.fit_errors[task.key] = FitErrors(status=Status(Code.UNRESOLVABLE, (task.invalid,), "request"))
                continue
            known = by_role.get(task.role) if task.role else None
            if known is None:
                known = _waiting_on_queue(ssn, task, status, nodes, idle)
                if task.role:
                    by_role[task.role] = known
            job.fit_errors[task.key] = known


def _idle(ssn: Session) -> Resources:
    """What the cluster has free now, summed over its nodes, in the dimensions of `Resources` (GPU
    milli: free cores)."""
    table, rows = ssn.table, ssn.candidate_rows()
    free = {
        "cpu": int(table.at_rows(table.cpu_free, rows).sum()),
        "memory": int(table.at_rows(table.mem_free, rows).sum()),
        "gpu": int(table.at_rows(table.gpu_sum, rows).sum()),
    }
    free.update({name: int(table.at_rows(column, rows).sum()) for name, column in table.scalar_free.items()})
    return Resources.build(free)


def _waiting_on_queue(ssn: Session, task: TaskInfo, status: Status, nodes: int, idle: Resources) -> FitErrors:
    """Why a pod of an overused queue waits: the nodes' reasons when none fits it (worked out now,
    while the table still shows why), else the queue's."""
    if task.resources.fits_in(idle):  # some node may well take it: the queue is what holds it back
        return FitErrors(status=status)
    if not ssn.explain:  # nobody reads the reasons: only what no node offers, which costs nothing to see
        missing = [name for name, _ in task.request.scalars if name not in ssn.table.scalar_free]
        if missing:
            return FitErrors(nodes, {f"Insufficient {name}": nodes for name in missing})
        return FitErrors(status=status)
    rows, errors = ssn.feasible(task)
    if rows.size:
        return FitErrors(status=status)
    errors.reasons  # noqa: B018 -- explain now, while the table still shows why
    return errors


def _not_admitted(ssn: Session, job: JobInfo) -> str:
    queue = ssn.queues.get(job.queue)
    if queue is None:
        why = f"queue {job.queue!r} does not exist"
    elif queue.state != "Open":
        why = f"queue {queue.name} is {queue.state}"
    else:
        why = "its minResources do not fit what the queue may take or the cluster has idle"
    return f"pod group {job.name} is Pending (not admitted to queue {job.queue}): {why}"


def _fail_all(ssn: Session, job: JobInfo, status: Status) -> None:
    ssn.touched_jobs.add(job.key)
    for task in job.pending:
        job.fit_errors[task.key] = FitErrors(status=status)


def allocate_job(ssn: Session, queue: QueueInfo, job: JobInfo) -> bool:
    """Place what can be placed of one job; True when the job should get another turn."""
    ssn.touched_jobs.add(job.key)
    stmt = ssn.statement()
    pending = job.pending
    if "backfill" in ssn.enabled_actions:  # best-effort tasks are backfill's
        pending = [t for t in pending if not t.best_effort]
    tasks = ssn.sorted_tasks(pending) if len(pending) > 1 else pending
    again = False
    failed_at: int | None = None
    failed_roles: set[str] = set()
    for i, task in enumerate(tasks):
        if task.role and task.role in failed_roles:  # its role's pods are alike: one failure speaks for all
            status = Status(Code.UNSCHEDULABLE, (f"a pod of task {task.role!r} found no node; skipped",), "allocate")
            job.fit_errors[task.key] = FitErrors(status=status)
            continue
        try:
            failure, stop = _place(ssn, stmt, queue, task)
        except Exception as exc:  # a bug, or an object nobody foresaw: this pod fails alone, the session goes on
            log.exception("allocate: considering %s/%s failed", task.namespace, task.name)
            failure, stop = (
                FitErrors(status=error(f"internal error: {type(exc).__name__}: {exc}").stamped("allocate")),
                True,
            )
        if failure is not None:
            job.fit_errors[task.key] = failure
            if stop:
                failed_at = i if failed_at is None else failed_at
                failed_roles.add(task.role)
                if not need_continue(job, failed_roles):
                    break
            continue
        job.fit_errors.pop(task.key, None)
        if ssn.job_ready(job) and i + 1 < len(tasks):
            again = True
            break
    if ssn.job_ready(job):
        stmt.commit()
    elif ssn.job_pipelined(job):  # held for this session only: its placed tasks wait, and say so
        _waiting_for_gang(ssn, job, tasks)
    else:
        if job.min_member > 1 and failed_at is not None:
            # every member waits for the same reason: the gang's shortfall, as it stood with the
            # members that fitted placed (before they are given back), not one member's view of it
            placed = job.ready_count() + job.waiting_count()
            failed = job.fit_errors.get(tasks[failed_at].key)
            # not a matter of room (a node-independent failure, or placement constraints): its own words
            if isinstance(failed, FitErrors) and (failed.status is not None or not about_room(failed.reasons)):
                message = f"{placed}/{len(job.tasks)} tasks placed; {tasks[failed_at].name}: {failed.message}"
            else:
                unplaced = [t for t in tasks[failed_at:] if t.status is TaskStatus.PENDING]
                message = gang_shortfall(ssn.table, placed, len(job.tasks), unplaced)
            nodes = int(ssn.candidate_rows().size)
            stmt.discard()
            status = Status(Code.UNSCHEDULABLE, (message,), "gang")
            for task in job.pending:
                job.fit_errors[task.key] = FitErrors(nodes, status=status)
        else:
            placed = job.ready_count() + job.waiting_count()
            stmt.discard()
            explain_unready_gang(ssn, job, tasks, placed)
        again = False
        if job.min_member > 1:
            _give_back(ssn, job)
    return again


def need_continue(job: JobInfo, failed_roles: set[str]) -> bool:
    """Whether the job's other tasks are worth trying after a task of each of `failed_roles` found
    no node (Volcano's `NeedContinueAllocating`): not when every task must run; when minMember is
    below the sum of minTaskMember, while the tasks placed and those left of roles that have not
    failed can still make minMember; else while every failed role already has its minimum placed."""
    if job.min_member >= len(job.tasks):
        return False
    wanted = job.min_task_member
    if job.min_member < sum(wanted.values()):
        left = sum(1 for t in job.pending if t.role not in failed_roles)
        return job.ready_count() + left >= job.min_member
    placed = Counter(t.role for t in job.tasks.values() if t.status in READY)
    return all(placed[role] >= wanted.get(role, 0) for role in failed_roles)


def _waiting_for_gang(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> None:
    """A pipelined job's placed tasks bind only once the gang is ready: that is why they wait."""
    placed = job.ready_count() + job.waiting_count()
    for task in tasks:
        if task.status is not TaskStatus.PENDING and task.key not in job.fit_errors:
            message = f"placed on {task.node}; waits for its gang to be ready ({placed}/{job.min_member} placed)"
            job.fit_errors[task.key] = FitErrors(status=Status(Code.UNSCHEDULABLE, (message,), "gang"))


def explain_unready_gang(ssn: Session, job: JobInfo, tasks: list[TaskInfo], placed: int) -> None:
    """Tasks placed and given back with their unready job have no failure of their own: they wait
    for the job's, which is the first failure met (or, with none, the gang's count)."""
    silent = [t for t in job.pending if t.key not in job.fit_errors]
    if not silent:  # as a rule (a pod of its own has its failure)
        return
    first = next((job.fit_errors[t.key] for t in tasks if t.key in job.fit_errors), None)
    why = f"the gang could place only {placed}/{job.min_member} of its tasks"
    if isinstance(first, FitErrors):
        why = f"{why}; {first.message}"
    nodes = int(ssn.candidate_rows().size)
    for task in silent:
        job.fit_errors[task.key] = FitErrors(nodes, status=Status(Code.UNSCHEDULABLE, (why,), "gang"))


def _give_back(ssn: Session, job: JobInfo) -> None:
    """An unready gang's bound members are evicted when a plugin says it has held them long enough
    (`JobRelease`), so that a gang cut short never sits on resources it cannot use."""
    held = [t for t in job.tasks.values() if t.status in BOUND and t.placement is not None]
    if not held or any(t.status is TaskStatus.BINDING for t in job.tasks.values()):
        return
    reason = ssn.job_release(job)
    if not reason:
        return
    log.warning("allocate: %s", reason)
    stmt = ssn.statement()
    for task in held:
        stmt.evict(task, reason)
    stmt.commit()


def _place(ssn: Session, stmt: Statement, queue: QueueInfo, task: TaskInfo) -> tuple[FitErrors | None, bool]:
    """Place one task inside the job's statement: (None, False) when placed, else why it is not and
    whether the job's other tasks should wait too (a misfit does; a queue cap stops only this one)."""
    if not ssn.allocatable(queue, task):
        status = Status(Code.UNSCHEDULABLE, (f"queue {queue.name} would exceed its capability",), "allocate")
        return FitErrors(status=status), False
    started = time.perf_counter() if ssn.observer is not None else 0.0
    row, errors = ssn.select(task)
    if row is None:
        if ssn.explain:
            errors.reasons  # noqa: B018 -- explain now, while the table still shows why
        return errors, True
    choice = ssn.allocate_devices(task, row)
    if isinstance(choice, Status):
        return FitErrors(nodes=errors.nodes, status=choice), True
    try:
        stmt.allocate(task, row, choice)
    except LedgerError as exc:  # a Reserve plugin's refusal carries its own status
        status = exc.status if isinstance(exc, ReserveError) else Status(Code.ERROR, (str(exc),), "allocate")
        return FitErrors(nodes=errors.nodes, status=status), True
    if ssn.observer is not None:
        ssn.observer.decided(choice.policy or "none", time.perf_counter() - started)
    return None, False


def build(arguments: Arguments, context: BuildContext) -> Allocate:
    del context
    if arguments:
        from runtimekit.scheduler.framework.arguments import ArgumentError

        known = {"predicateErrorCacheEnable"}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ArgumentError(f"allocate: unknown argument {unknown[0]!r}")
    return Allocate()
