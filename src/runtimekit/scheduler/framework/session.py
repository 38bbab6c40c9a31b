"""A scheduling session: one cycle's private snapshot, the plugins of the configured tiers, and the
rules that combine their answers (Volcano's `session_plugins.go`):

- ordering (job, task, queue): tiers then plugins in order; the first non-zero answer wins;
- predicates: all must pass, the first failure per node is the reason reported;
- node order: scores are summed over every plugin of every tier;
- best node: the first plugin with an opinion decides; else the top score, ties to the lowest rank;
- job ready, allocatable, preemptive: every plugin must agree;  overused: any plugin suffices;
- job pipelined and enqueueable: any Reject refuses; a tier with a Permit decides; else permit;
- job starving: the first tier with any plugin decides, all of that tier must agree;
- preemptable and reclaimable: per tier, abstainers are skipped and the victim lists intersected;
  the first tier with an answer decides.
Callers: the actions. All state changes go through a `Statement` (or `allocate` for backfill).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from runtimekit.model import Placement, PodKey
from runtimekit.scheduler.framework.info import (
    JobInfo,
    QueueInfo,
    Snapshot,
    TaskInfo,
)
from runtimekit.scheduler.framework.interfaces import (
    DeviceChoice,
    Mask,
    Rows,
    Scores,
    Verdict,
    Vote,
)
from runtimekit.scheduler.framework.statement import Statement
from runtimekit.scheduler.framework.status import SUCCESS, Code, Explain, FitErrors, Status, error

if TYPE_CHECKING:
    from runtimekit.scheduler.framework.cache import Cache
    from runtimekit.scheduler.framework.framework import Framework

T = TypeVar("T")
_session_ids = itertools.count(1)


class Session:
    def __init__(self, framework: Framework, cache: Cache, snapshot: Snapshot) -> None:
        self.uid = next(_session_ids)
        self.framework = framework
        self.cache = cache
        self.snapshot = snapshot
        self.table = snapshot.table
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.now = snapshot.now
        self.state: dict[str, Any] = {}  # per-cycle state shared by plugins, keyed by plugin name
        self.enabled_actions = framework.enabled_actions
        self._points = framework.points
        self._flat: dict[str, list[Any]] = framework.flat_points  # per point, every tier in order
        self.touched_jobs: set[str] = set()
        self.explain = framework.explain  # work out why unschedulable tasks fit nowhere

    # -- plugin lists ----------------------------------------------------------------------
    def tiers_of(self, point: str) -> list[list[Any]]:
        """The plugins implementing a built-in point, per tier, in configured order."""
        return self._points.get(point, [])

    def implementing(self, interface: type[T]) -> list[list[T]]:
        """Plugins implementing any interface (e.g. one an out-of-tree action defines), per tier."""
        return [[p for p in tier if isinstance(p, interface)] for tier in self.framework.plugins_by_tier]

    def _all(self, point: str) -> list[Any]:
        return self._flat.get(point, [])

    # -- ordering --------------------------------------------------------------------------
    def _compare(self, point: str, method: str, left: Any, right: Any) -> int:
        for plugin in self._all(point):
            result: int = getattr(plugin, method)(left, right)
            if result:
                return result
        return 0

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        result = self._compare("job_order", "job_order", left, right)
        return result or _fallback(left.created, right.created, left.key, right.key)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        result = self._compare("task_order", "task_order", left, right)
        return result or _fallback(left.created, right.created, left.key, right.key)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        result = self._compare("queue_order", "queue_order", left, right)
        return result or _fallback(0, 0, left.name, right.name)

    @property
    def job_key(self) -> Callable[[JobInfo], tuple[float, str]] | None:
        """A sort key that orders exactly as `job_order` when no plugin orders jobs; else None."""
        return None if self._all("job_order") else _creation_key

    @property
    def task_key(self) -> Callable[[TaskInfo], tuple[float, str]] | None:
        return None if self._all("task_order") else _creation_key

    @property
    def queue_key(self) -> Callable[[QueueInfo], tuple[int, str]] | None:
        return None if self._all("queue_order") else _queue_key

    def sorted_jobs(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        return sorted(jobs, key=self.job_key or functools.cmp_to_key(self.job_order))

    def sorted_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        return sorted(tasks, key=self.task_key or functools.cmp_to_key(self.task_order))

    def sorted_queues(self, queues: Iterable[QueueInfo]) -> list[QueueInfo]:
        return sorted(queues, key=self.queue_key or functools.cmp_to_key(self.queue_order))

    # -- validity and fit ------------------------------------------------------------------
    def job_valid(self, job: JobInfo) -> Status:
        for plugin in self._flat["job_valid"]:
            status: Status = plugin.job_valid(job)
            if not status.ok:
                return status.stamped(plugin.name)
        return SUCCESS

    def pre_predicate(self, task: TaskInfo) -> Status:
        if task.invalid:
            return Status(Code.UNRESOLVABLE, (task.invalid,), "request")
        for plugin in self._flat["pre_predicate"]:
            status: Status = plugin.pre_predicate(task)
            if not status.ok:
                return status.stamped(plugin.name)
        return SUCCESS

    def candidate_rows(self) -> Rows:
        return self.table.active_rows()

    def resource_fit(self, task: TaskInfo, rows: Rows, errors: FitErrors) -> Rows:
        """Rows with room for the task's CPU, memory, scalar resources (extended resources, storage,
        huge pages) and one more pod: kube-scheduler's NodeResourcesFit, Volcano's idle check."""
        table, req = self.table, task.request
        # cpu_room is the free CPU of rows with a pod slot left (-1 on the others; requests are >= 0)
        passed = (table.at_rows(table.cpu_room, rows) >= req.cpu_milli) & (
            table.at_rows(table.mem_free, rows) >= req.memory_mib
        )
        for name, amount in req.scalars:
            column = table.scalar_free.get(name)
            if column is None:  # no node offers it
                passed = np.zeros(rows.size, np.bool_)
            else:
                passed &= table.at_rows(column, rows) >= amount
        if np.count_nonzero(passed) == passed.size:  # all pass (count_nonzero costs less than .all())
            return rows

        def explain() -> list[tuple[str, Mask]]:
            reasons = [
                ("Too many pods", table.at_rows(table.pods_free, rows) < 1),
                ("Insufficient cpu", table.at_rows(table.cpu_free, rows) < req.cpu_milli),
                ("Insufficient memory", table.at_rows(table.mem_free, rows) < req.memory_mib),
            ]
            for name, amount in req.scalars:
                column = table.scalar_free.get(name)
                short = np.ones(rows.size, np.bool_) if column is None else table.at_rows(column, rows) < amount
                reasons.append((f"Insufficient {name}", short))
            return reasons

        errors.defer("Too many pods", passed, explain, exclusive=False)
        return table.keep(rows, passed)

    def predicate(self, task: TaskInfo, rows: Rows, errors: FitErrors) -> Rows:
        """Rows that pass every predicate plugin; failures are counted per reason in `errors`."""
        for plugin in self._flat["predicate"]:
            if rows.size == 0:
                break
            verdict: Verdict = plugin.predicate(task, rows, self)
            passed = verdict.passed
            if np.count_nonzero(passed) == passed.size:
                continue
            errors.defer(f"rejected by {plugin.name}", passed, _explainer(verdict))
            rows = self.table.keep(rows, passed)
        return rows

    def feasible(self, task: TaskInfo) -> tuple[Rows, FitErrors]:
        """Rows that can take the task now, with the reasons the others cannot."""
        rows = self.candidate_rows()
        errors = FitErrors(nodes=int(rows.size))
        status = self.pre_predicate(task)
        if not status.ok:
            errors.status = status
            return rows[:0], errors
        rows = self.resource_fit(task, rows, errors)
        return self.predicate(task, rows, errors), errors

    def node_order(self, task: TaskInfo, rows: Rows) -> Scores:
        plugins = self._flat["node_order"]
        if len(plugins) == 1:  # nothing to add up: the one plugin's scores as they are
            scores: Scores = plugins[0].node_order(task, rows, self)
            return scores if scores.dtype == np.float64 else scores.astype(np.float64)
        total = np.zeros(rows.size, np.float64)
        for plugin in plugins:
            total += plugin.node_order(task, rows, self)
        return total

    def best_node(self, task: TaskInfo, rows: Rows, scores: Scores) -> int:
        """The chosen row: a plugin's override, else the top score with ties to the lowest rank."""
        for plugin in self._flat["best_node"]:
            chosen: int | None = plugin.best_node(task, rows, scores)
            if chosen is not None:
                return int(chosen)
        first = int(scores.argmax())
        ties = scores == scores[first]
        if np.count_nonzero(ties) == 1:
            return int(rows[first])
        top = rows[ties]
        return int(top[np.argmin(self.snapshot.rank[top])])

    def select(self, task: TaskInfo) -> tuple[int | None, FitErrors]:
        """Predicates, then scores, then the best node: the row for the task, or None."""
        rows, errors = self.feasible(task)
        if rows.size == 0:
            return None, errors
        if rows.size == 1:
            # As kube-scheduler: a single feasible node is taken without scoring.
            return int(rows[0]), errors
        return self.best_node(task, rows, self.node_order(task, rows)), errors

    def allocate_devices(self, task: TaskInfo, row: int) -> DeviceChoice | Status:
        """The devices every device plugin chooses for the containers it manages (gpushare the
        shares and whole GPUs, mig the slices), merged; the first failure wins."""
        answers: list[DeviceChoice] = []
        for plugin in self._flat["allocate_devices"]:
            answer: DeviceChoice | Status | None = plugin.allocate_devices(task, row, self)
            if isinstance(answer, Status):
                return answer.stamped(plugin.name)
            if answer is not None:
                answers.append(answer)
        if len(answers) == 1:  # one plugin owns every device of the task: its answer as it is
            choice = answers[0]
        else:
            containers = tuple(c for answer in answers for c in answer.containers)
            choice = DeviceChoice(containers, "+".join(a.policy for a in answers if a.policy))
        placed = sum(1 for _, slots in choice.containers if slots)
        if task.request.uses_gpu and placed < len(task.request.gpus):
            return error("no plugin allocates some of the GPUs asked for; enable gpushare (and mig) in the conf")
        return choice

    def placement(self, task: TaskInfo, row: int, choice: DeviceChoice) -> Placement:
        node = self.table.names()[row]
        assert node is not None, "placement on a removed node"
        request = task.request
        return Placement(node, request.cpu_milli, request.memory_mib, choice.slots, request.scalars)

    # -- jobs ------------------------------------------------------------------------------
    def job_ready(self, job: JobInfo) -> bool:
        plugins = self._flat["job_ready"]
        return not plugins or all(p.job_ready(job) for p in plugins)

    def _vote(self, point: str, method: str, job: JobInfo) -> bool:
        for tier in self.tiers_of(point):
            permitted = False
            for plugin in tier:
                vote: Vote = getattr(plugin, method)(job)
                if vote is Vote.REJECT:
                    return False
                permitted |= vote is Vote.PERMIT
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("job_pipelined", "job_pipelined", job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("job_enqueueable", "job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for plugin in self._all("job_enqueued"):
            plugin.job_enqueued(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.tiers_of("job_starving"):
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    def _victims(self, point: str, method: str, actor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        for tier in self.tiers_of(point):
            chosen: dict[PodKey, TaskInfo] | None = None
            for plugin in tier:
                victims: list[TaskInfo] | None = getattr(plugin, method)(actor, candidates)
                if victims is None:
                    continue
                keyed = {v.key: v for v in victims}
                chosen = keyed if chosen is None else {k: v for k, v in chosen.items() if k in keyed}
                if not chosen:
                    break
            if chosen is not None:
                return list(chosen.values())
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", "preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", "reclaimable", reclaimer, candidates)

    def overused(self, queue: QueueInfo) -> bool:
        plugins = self._flat["overused"]
        return bool(plugins) and any(p.overused(queue) for p in plugins)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        plugins = self._flat["allocatable"]
        return not plugins or all(p.allocatable(queue, task) for p in plugins)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        plugins = self._flat["preemptive"]
        return not plugins or all(p.preemptive(queue, task) for p in plugins)

    # -- events and statements -------------------------------------------------------------
    def fire(self, allocated: bool, task: TaskInfo) -> None:
        for plugin in self._flat["event_handler"]:
            (plugin.on_allocate if allocated else plugin.on_deallocate)(task)

    def statement(self) -> Statement:
        return Statement(self)

    def each_task(self, predicate: Callable[[TaskInfo], bool]) -> list[TaskInfo]:
        return [t for job in self.jobs.values() for t in job.tasks.values() if predicate(t)]


def _explainer(verdict: Verdict) -> Explain:
    reasons = verdict.reasons
    if callable(reasons):
        return reasons
    return lambda: list(reasons)


def _creation_key(item: JobInfo | TaskInfo) -> tuple[float, str]:
    return (item.created, item.key)


def _queue_key(queue: QueueInfo) -> tuple[int, str]:
    return (0, queue.name)


def _fallback(left_time: float, right_time: float, left_key: str, right_key: str) -> int:
    if left_time != right_time:
        return -1 if left_time < right_time else 1
    return (left_key > right_key) - (left_key < right_key)
