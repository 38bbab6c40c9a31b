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
  the first tier with an answer decides;
- reserve: in order, the first failure wins and unreserves every Reserve plugin (in reverse order);
  pre-bind: in order, the first failure wins; bind: the first plugin that does not skip binds.
Each point has its own typed dispatcher over `PluginLists`. Callers: the actions, the statement
(reserve), the cache (`BindCycle`: pre-bind, bind, unreserve). All state changes go through a
`Statement` (or `allocate` for backfill).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np

from runtimekit.model import Placement, PodKey
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.cache import Cache
from runtimekit.scheduler.framework.info import JobInfo, QueueInfo, Snapshot, TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    EVERY_ROW,
    JobOrder,
    JobOrderKey,
    PluginLists,
    RowLocalPredicate,
    RowLocalScores,
    Tiered,
)
from runtimekit.scheduler.framework.observe import STAGE_PREDICATE, STAGE_SCORING, Observer
from runtimekit.scheduler.framework.rowmemos import RowMemos
from runtimekit.scheduler.framework.sampling import NodeSampler
from runtimekit.scheduler.framework.state import CycleState
from runtimekit.scheduler.framework.statement import Statement
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Code, Explain, FitErrors, Status, error
from runtimekit.scheduler.framework.tiebreak import compare_tasks
from runtimekit.scheduler.framework.values import DeviceChoice, Mask, Rows, Scores, Verdict, Vote
from runtimekit.scheduler.framework.view import CycleView

T = TypeVar("T")


class BindCycle:
    """The plugins' part of a bind (`binding.BindHooks`), as the cache runs it after a commit: it
    holds the plugin lists only, not the session, which may be gone by then."""

    __slots__ = ("_binds", "_pre_binds", "_reserves")

    def __init__(self, plugins: PluginLists) -> None:
        self._reserves = plugins.reserve.flat
        self._pre_binds = plugins.pre_bind.flat
        self._binds = plugins.bind.flat

    def pre_bind(self, binding: Binding) -> Status:
        for plugin in self._pre_binds:
            status = plugin.pre_bind(binding)
            if status is not SUCCESS and not status.ok:
                return status.stamped(plugin.name)
        return SUCCESS

    def bind(self, binding: Binding) -> Status:
        for plugin in self._binds:
            status = plugin.bind(binding)
            if status.code is not Code.SKIP:
                return status.stamped(plugin.name)
        return SKIP

    def unreserve(self, task: TaskInfo) -> None:
        for plugin in reversed(self._reserves):
            plugin.unreserve(task)


class Session:
    """One cycle: the snapshot, the plugin lists, and the rules that combine their answers. Plugins
    are handed its `view` (a `CycleView`), never the session; it is a statement `Host`, and actions
    use the whole of it."""

    def __init__(
        self,
        plugins: PluginLists,
        cache: Cache,
        snapshot: Snapshot,
        enabled_actions: frozenset[str] = frozenset(),
        explain: bool = True,
        observer: Observer | None = None,
        sampler: NodeSampler | None = None,
        bind_cycle: BindCycle | None = None,
        memos: RowMemos | None = None,
    ) -> None:
        self.state = CycleState()  # what plugins share for this cycle (emptied when it closes)
        self.plugins = plugins
        self.cache = cache
        self.snapshot = snapshot
        self.table = snapshot.table
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.now = snapshot.now
        # what plugins are handed: the cycle's parts, never the session (whose cache leads to the binder)
        self.view = CycleView(self.state, snapshot, snapshot.table, snapshot.jobs, snapshot.queues, snapshot.now)
        self.enabled_actions = enabled_actions
        self.touched_jobs: set[str] = set()
        self.explain = explain  # work out why unschedulable tasks fit nowhere
        self.observer = observer  # told how long predicates and scoring take (the scheduler's metrics)
        self.sampler = sampler  # limits how many feasible nodes are scored (--percentage-nodes-to-find)
        self.bind_cycle = bind_cycle or BindCycle(plugins)  # the framework builds it once
        self.held: dict[PodKey, TaskInfo] = {}  # reserved in this session, not handed to the cache yet
        # a sort key that orders exactly as `job_order` (the plugins' keys in order, then the
        # fallback) when every plugin ordering jobs has one (`JobOrderKey`); else None. A key is taken
        # once per job sorted or pushed, so a job must not change order while queued: the actions
        # change only the job they have popped
        self.job_key = _job_key(plugins.job_order.flat)
        # the plugins that score nodes, when every one of them can declare a pod's scores row-local
        # (unless the only one keeps its scores per row itself)
        self._row_local: list[RowLocalScores] | None = plugins.row_local_scorers
        # kept from session to session by the framework while the nodes' metadata and capacities hold
        memos = (memos or RowMemos()).open(snapshot)
        self._score_memo = memos.scores
        # the predicate plugins, when every one of them can declare a pod's verdicts row-local
        self._fit_local: list[RowLocalPredicate] | None = plugins.row_local_checks
        self._fit_memo = memos.fits

    def implementing(self, interface: type[T]) -> list[list[T]]:
        """Plugins implementing any interface (e.g. one an out-of-tree action defines), per tier."""
        return [[p for p in tier if isinstance(p, interface)] for tier in self.plugins.every.tiers]

    # -- ordering --------------------------------------------------------------------------
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        for plugin in self.plugins.job_order.flat:
            result = plugin.job_order(left, right)
            if result:
                return result
        return _fallback(left.created, right.created, left.key, right.key)

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        for plugin in self.plugins.task_order.flat:
            result = plugin.task_order(left, right)
            if result:
                return result
        return compare_tasks(left, right)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        for plugin in self.plugins.queue_order.flat:
            result = plugin.queue_order(left, right)
            if result:
                return result
        return _fallback(0, 0, left.name, right.name)

    @property
    def queue_key(self) -> Callable[[QueueInfo], tuple[int, str]] | None:
        return None if self.plugins.queue_order.flat else _queue_key

    def sorted_jobs(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        return sorted(jobs, key=self.job_key or functools.cmp_to_key(self.job_order))

    def sorted_tasks(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        # Volcano's fallback (`tiebreak.py`) is no plain sort key: a pod's index counts only between
        # two pods that both have one; the jobs sorted here hold a few tasks each
        return sorted(tasks, key=functools.cmp_to_key(self.task_order))

    def sorted_queues(self, queues: Iterable[QueueInfo]) -> list[QueueInfo]:
        return sorted(queues, key=self.queue_key or functools.cmp_to_key(self.queue_order))

    # -- validity and fit ------------------------------------------------------------------
    def job_valid(self, job: JobInfo) -> Status:
        for plugin in self.plugins.job_valid.flat:
            status = plugin.job_valid(job)
            if not status.ok:
                return status.stamped(plugin.name)
        return SUCCESS

    def pre_predicate(self, task: TaskInfo) -> tuple[Status, frozenset[str]]:
        """The first failure, or success with the names of plugins that skip their predicate."""
        if task.invalid:
            return Status(Code.UNRESOLVABLE, (task.invalid,), "request"), frozenset()
        skipped: list[str] = []
        for plugin in self.plugins.pre_predicate.flat:
            status = plugin.pre_predicate(task)
            if status.code is Code.SKIP:
                skipped.append(plugin.name)
            elif not status.ok:
                return status.stamped(plugin.name), frozenset()
        return SUCCESS, frozenset(skipped)

    def candidate_rows(self) -> Rows:
        return self.table.active_rows()

    def resource_fit(self, task: TaskInfo, rows: Rows, errors: FitErrors) -> Rows:
        """Rows with room for the task's CPU, memory, scalar resources (extended resources, storage,
        huge pages) and one more pod: kube-scheduler's NodeResourcesFit, Volcano's idle check."""
        table, req = self.table, task.request
        # cpu_room is the free CPU of rows with a pod slot left (-1 on the others; requests are >= 0)
        passed = (table.at_rows(table.cpu_room, rows) >= req.cpu_milli) & (
            table.at_rows(table.mem_free, rows) >= req.memory_bytes
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
                ("Insufficient memory", table.at_rows(table.mem_free, rows) < req.memory_bytes),
            ]
            for name, amount in req.scalars:
                column = table.scalar_free.get(name)
                short = np.ones(rows.size, np.bool_) if column is None else table.at_rows(column, rows) < amount
                reasons.append((f"Insufficient {name}", short))
            return reasons

        errors.defer("Too many pods", passed, explain, exclusive=False)
        return table.keep(rows, passed)

    def predicate(self, task: TaskInfo, rows: Rows, errors: FitErrors, skip: frozenset[str] = frozenset()) -> Rows:
        """Rows that pass every predicate plugin (but those in `skip`); failures are counted per
        reason in `errors`, with the rows no eviction can help."""
        for plugin in self.plugins.predicate.flat:
            if rows.size == 0:
                break
            if skip and plugin.name in skip:
                continue
            verdict = plugin.predicate(task, rows, self.view)
            passed = verdict.passed
            if np.count_nonzero(passed) == passed.size:
                continue
            errors.defer(f"rejected by {plugin.name}", passed, _explainer(verdict))
            if verdict.unresolvable is not None:
                errors.defer_unresolvable(rows, passed, verdict.unresolvable)
            rows = self.table.keep(rows, passed)
        return rows

    def feasible(self, task: TaskInfo) -> tuple[Rows, FitErrors]:
        """Rows that can take the task now, with the reasons the others cannot."""
        rows = self.candidate_rows()
        errors = FitErrors(nodes=int(rows.size))
        status, skip = self.pre_predicate(task)
        if not status.ok:
            errors.status = status
            return rows[:0], errors
        rows = self.resource_fit(task, rows, errors)
        return self.predicate(task, rows, errors, skip), errors

    def _select_feasible(self, task: TaskInfo) -> tuple[Rows, FitErrors]:
        """`feasible` for `select`: the same rows, kept per pod signature and checked again only on
        the rows that changed when every predicate plugin declares this pod's verdicts row-local
        (`fitmemo.py`). When rows pass, the errors hold no reasons (a placed pod's are never read);
        when none does, the full path works them out as `feasible` does."""
        if self._fit_local is None:
            return self.feasible(task)
        rows = self.candidate_rows()
        status, skip = self.pre_predicate(task)
        if not status.ok:
            errors = FitErrors(nodes=int(rows.size))
            errors.status = status
            return rows[:0], errors
        req = task.request
        keys: list[Hashable] = [req.cpu_milli, req.memory_bytes, req.scalars, skip]
        passes: list[str] = []  # plugins the pod passes on every row: not asked about the rows checked
        for plugin in self._fit_local:
            if skip and plugin.name in skip:
                continue
            key = plugin.predicate_key(task, self.view)
            if key is None:
                return self._filtered(task, rows, skip)
            if key == EVERY_ROW:
                passes.append(plugin.name)
            keys.append(key)
        unasked = skip.union(passes) if passes else skip
        found = self._fit_memo.rows(tuple(keys), self.table, rows, lambda stale: self._passing(task, stale, unasked))
        if found.size == 0:
            return self._filtered(task, rows, skip)
        return found, FitErrors(nodes=int(rows.size))

    def _filtered(self, task: TaskInfo, rows: Rows, skip: frozenset[str]) -> tuple[Rows, FitErrors]:
        """`feasible` after its pre-predicates passed."""
        errors = FitErrors(nodes=int(rows.size))
        rows = self.resource_fit(task, rows, errors)
        return self.predicate(task, rows, errors, skip), errors

    def _passing(self, task: TaskInfo, rows: Rows, skip: frozenset[str]) -> Rows:
        """Those of `rows` that pass the resource fit and the predicates (the reasons dropped)."""
        scratch = FitErrors()
        return self.predicate(task, self.resource_fit(task, rows, scratch), scratch, skip)

    def node_order(self, task: TaskInfo, rows: Rows) -> Scores:
        """Every node-order plugin's scores of the rows, summed; kept per pod signature and rescored
        only on the rows that changed when every plugin declares this pod's scores row-local
        (`scorememo.py`), without node sampling (whose candidates change from pod to pod)."""
        if self._row_local is not None and self.sampler is None:
            keys: list[Hashable] = []
            for plugin in self._row_local:
                key = plugin.row_local_key(task, self.view)
                if key is None:
                    return self._summed(task, rows)
                keys.append(key)
            return self._score_memo.scores(tuple(keys), self.table, rows, lambda stale: self._summed(task, stale))
        return self._summed(task, rows)

    def _summed(self, task: TaskInfo, rows: Rows) -> Scores:
        plugins = self.plugins.node_order.flat
        if len(plugins) == 1:  # nothing to add up: the one plugin's scores as they are
            scores = plugins[0].node_order(task, rows, self.view)
            return scores if scores.dtype == np.float64 else scores.astype(np.float64)
        total = np.zeros(rows.size, np.float64)
        for plugin in plugins:
            total += plugin.node_order(task, rows, self.view)
        return total

    def best_node(self, task: TaskInfo, rows: Rows, scores: Scores) -> int:
        """The chosen row: a plugin's override, else the top score with ties to the lowest rank."""
        for plugin in self.plugins.best_node.flat:
            chosen = plugin.best_node(task, rows, scores)
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
        if self.observer is not None:
            return self._observed_select(task, self.observer)
        rows, errors = self._select_feasible(task)
        if self.sampler is not None and rows.size > 1:
            rows = self.sampler.take(self.candidate_rows(), rows)
        if rows.size == 0:
            return None, errors
        if rows.size == 1:
            # As kube-scheduler: a single feasible node is taken without scoring.
            return int(rows[0]), errors
        return self.best_node(task, rows, self.node_order(task, rows)), errors

    def _observed_select(self, task: TaskInfo, observer: Observer) -> tuple[int | None, FitErrors]:
        """`select`, telling the observer how long the predicates and the scoring took."""
        started = time.perf_counter()
        rows, errors = self._select_feasible(task)
        if self.sampler is not None and rows.size > 1:
            rows = self.sampler.take(self.candidate_rows(), rows)
        scoring = time.perf_counter()
        observer.stage_done(STAGE_PREDICATE, scoring - started)
        if rows.size <= 1:
            return (int(rows[0]) if rows.size else None), errors
        row = self.best_node(task, rows, self.node_order(task, rows))
        observer.stage_done(STAGE_SCORING, time.perf_counter() - scoring)
        return row, errors

    def allocate_devices(self, task: TaskInfo, row: int) -> DeviceChoice | Status:
        """The devices every device plugin chooses for the containers it manages (gpushare the
        shares and whole GPUs, mig the slices), merged; the first failure wins."""
        answers: list[DeviceChoice] = []
        for plugin in self.plugins.allocate_devices.flat:
            answer = plugin.allocate_devices(task, row, self.view)
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
            return error(
                "no plugin allocates some of the GPUs asked for: shares and whole GPUs need gpushare "
                "(or deviceshare with that kind enabled), MIG slices mig"
            )
        return choice

    def placement(self, task: TaskInfo, row: int, choice: DeviceChoice) -> Placement:
        node = self.table.names()[row]
        assert node is not None, "placement on a removed node"
        request = task.request
        return Placement(node, request.cpu_milli, request.memory_bytes, choice.slots, request.scalars)

    # -- jobs ------------------------------------------------------------------------------
    def job_ready(self, job: JobInfo) -> bool:
        plugins = self.plugins.job_ready.flat
        return not plugins or all(p.job_ready(job) for p in plugins)

    def job_pipelined(self, job: JobInfo) -> bool:
        return _vote(self.plugins.job_pipelined, lambda p: p.job_pipelined(job))

    def job_enqueueable(self, job: JobInfo) -> bool:
        return _vote(self.plugins.job_enqueueable, lambda p: p.job_enqueueable(job))

    def job_enqueued(self, job: JobInfo) -> None:
        for plugin in self.plugins.job_enqueued.flat:
            plugin.job_enqueued(job)

    def job_starving(self, job: JobInfo) -> bool:
        for tier in self.plugins.job_starving.tiers:
            if tier:
                return all(p.job_starving(job) for p in tier)
        return False

    def job_release(self, job: JobInfo) -> str:
        """Why to give back what the unready `job` holds placed: the first plugin's reason, or ""."""
        for plugin in self.plugins.job_release.flat:
            reason = plugin.job_release(job)
            if reason:
                return reason
        return ""

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return _victims(self.plugins.preemptable, lambda p: p.preemptable(preemptor, candidates))

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return _victims(self.plugins.reclaimable, lambda p: p.reclaimable(reclaimer, candidates))

    def overused(self, queue: QueueInfo) -> bool:
        plugins = self.plugins.overused.flat
        return bool(plugins) and any(p.overused(queue) for p in plugins)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        plugins = self.plugins.allocatable.flat
        return not plugins or all(p.allocatable(queue, task) for p in plugins)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        plugins = self.plugins.preemptive.flat
        return not plugins or all(p.preemptive(queue, task) for p in plugins)

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """The first VictimQueueOrder plugin's opinion on two victims' queues, 0 with none."""
        for plugin in self.plugins.victim_queue_order.flat:
            order = plugin.victim_queue_order(left, right, preemptor)
            if order:
                return order
        return 0

    # -- after the node is chosen ----------------------------------------------------------
    def reserve(self, task: TaskInfo, choice: DeviceChoice) -> Status:
        """Every Reserve plugin in order for a task just placed; on the first failure every Reserve
        plugin is unreserved (kube-scheduler's rule) and the failure returned."""
        plugins = self.plugins.reserve.flat
        if not plugins:
            return SUCCESS
        for plugin in plugins:
            status = plugin.reserve(task, choice, self.view)
            if status is not SUCCESS and not status.ok:
                self.bind_cycle.unreserve(task)
                return status.stamped(plugin.name)
        self.held[task.key] = task
        return SUCCESS

    def unreserve(self, task: TaskInfo) -> None:
        """Undo `reserve` for a task the session gives up (idempotent)."""
        if self.held.pop(task.key, None) is not None:
            self.bind_cycle.unreserve(task)

    def hand_over(self, task: TaskInfo) -> None:
        """The task goes to the cache to be bound: from here the cache unreserves it on failure."""
        self.held.pop(task.key, None)

    # -- events and statements -------------------------------------------------------------
    def fire(self, allocated: bool, task: TaskInfo) -> None:
        for plugin in self.plugins.event_handler.flat:
            (plugin.on_allocate if allocated else plugin.on_deallocate)(task)

    def statement(self) -> Statement:
        return Statement(self)

    def each_task(self, predicate: Callable[[TaskInfo], bool]) -> list[TaskInfo]:
        return [t for job in self.jobs.values() for t in job.tasks.values() if predicate(t)]


def _vote(point: Tiered[T], ask: Callable[[T], Vote]) -> bool:
    """Any Reject refuses; a tier with a Permit decides; else permit."""
    for tier in point.tiers:
        permitted = False
        for plugin in tier:
            vote = ask(plugin)
            if vote is Vote.REJECT:
                return False
            permitted |= vote is Vote.PERMIT
        if permitted:
            return True
    return True


def _victims(point: Tiered[T], ask: Callable[[T], list[TaskInfo] | None]) -> list[TaskInfo]:
    """Per tier, abstainers are skipped and the victim lists intersected; the first tier with an
    answer decides."""
    for tier in point.tiers:
        chosen: dict[PodKey, TaskInfo] | None = None
        for plugin in tier:
            victims = ask(plugin)
            if victims is None:
                continue
            keyed = {v.key: v for v in victims}
            chosen = keyed if chosen is None else {k: v for k, v in chosen.items() if k in keyed}
            if not chosen:
                break
        if chosen is not None:
            return list(chosen.values())
    return []


def _explainer(verdict: Verdict) -> Explain:
    reasons = verdict.reasons
    if callable(reasons):
        return reasons
    return lambda: list(reasons)


def _creation_key(item: JobInfo) -> tuple[float, str]:
    return (item.created, item.key)


def _job_key(plugins: Sequence[JobOrder]) -> Callable[[JobInfo], tuple[float | str, ...]] | None:
    keyed = [plugin.job_order_key for plugin in plugins if isinstance(plugin, JobOrderKey)]
    if len(keyed) != len(plugins):
        return None
    if not keyed:
        return _creation_key

    def key(job: JobInfo) -> tuple[float | str, ...]:
        return (*[plugin_key(job) for plugin_key in keyed], job.created, job.key)

    return key


def _queue_key(queue: QueueInfo) -> tuple[int, str]:
    return (0, queue.name)


def _fallback(left_time: float, right_time: float, left_key: str, right_key: str) -> int:
    if left_time != right_time:
        return -1 if left_time < right_time else 1
    return (left_key > right_key) - (left_key < right_key)
