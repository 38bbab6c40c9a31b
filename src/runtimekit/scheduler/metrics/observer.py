"""Volcano's scheduler metrics that count or time what happens (pkg/scheduler/metrics in Volcano), under
Volcano's names, labels and bucket bounds, plus the kit's decision time per placement policy.

`SchedulerMetrics` is the framework's `Observer` (sessions, actions, plugin hooks, predicate and
scoring stages, preemption) and a prometheus collector. Two wrappers feed it what happens outside
the framework, so neither the cache nor the binder knows about metrics:
- `ObservedCache` stands between a session and the live cache: a committed allocation is a task
  `Assumed` (and its job's end-to-end figures); at session close, each job's unplaced tasks are
  schedule attempts `unschedulable` or `error`, and its unready count is set;
- `ObservedBinder` stands between the cache and the API server: a binding that succeeds is a task
  `Bound` and an attempt `scheduled`, one that fails an attempt `error`; its round trip is the `Bind`
  stage.
Figures that are a state (queues, GPUs) are worked out at scrape time in state.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from runtimekit.kube.objects import PodGroupStatus, QueueStatus
from runtimekit.scheduler.binder import Binder
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks
from runtimekit.scheduler.framework.cache import Cache
from runtimekit.scheduler.framework.info import JobInfo, Snapshot, TaskInfo
from runtimekit.scheduler.framework.status import Code, FitErrors
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.metrics.series import (
    ACTION_BUCKETS,
    E2E_BUCKETS,
    JOB_BUCKETS,
    PLUGIN_BUCKETS,
    STAGE_BUCKETS,
    TASK_BUCKETS,
    HistogramVec,
    ValueVec,
)

JOB_LABELS = ("job_name", "queue", "job_namespace")
# Volcano's task stages (from the pod's creation) and per-task stage names
WATCHED, ASSUMED, BOUND, STAGE_BIND = "Watched", "Assumed", "Bound", "Bind"
SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
# the kit's decision time per policy, in seconds: 50 µs to 2.5 s
DECISION_BUCKETS = (5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class SchedulerMetrics(Collector):
    """Every event-driven family; `jobs` (set by the scheduler) names the jobs that still exist, so
    that a deleted job's series go, as Volcano deletes them with the job."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.jobs: Callable[[], Collection[str]] | None = None
        ms = "milliseconds"
        self.e2e = HistogramVec(
            "volcano_e2e_scheduling_latency_milliseconds",
            f"One scheduling session, open to close, in {ms}",
            (),
            E2E_BUCKETS,
        )
        self.open_session = HistogramVec(
            "volcano_open_session_duration_milliseconds",
            f"Opening a session (snapshot and plugins), in {ms}",
            (),
            E2E_BUCKETS,
        )
        self.job_latency = HistogramVec(
            "volcano_e2e_job_scheduling_latency_milliseconds",
            f"From a job's creation to a task of it placed, in {ms}",
            (),
            JOB_BUCKETS,
        )
        self.plugin = HistogramVec(
            "volcano_plugin_scheduling_latency_milliseconds",
            f"A plugin's session open or close hook, in {ms}",
            ("plugin", "OnSession"),
            PLUGIN_BUCKETS,
        )
        self.action = HistogramVec(
            "volcano_action_scheduling_latency_milliseconds",
            f"One action of a session, in {ms}",
            ("action",),
            ACTION_BUCKETS,
        )
        self.task = HistogramVec(
            "volcano_task_scheduling_latency_milliseconds",
            f"From a pod's creation to a stage (Watched, Assumed, Bound), in {ms}",
            ("stage",),
            TASK_BUCKETS,
        )
        self.stage = HistogramVec(
            "volcano_scheduling_stage_duration_milliseconds",
            f"One task's Predicate, Scoring or Bind stage, in {ms}",
            ("stage",),
            STAGE_BUCKETS,
        )
        self.job_duration = ValueVec(
            "volcano_e2e_job_scheduling_duration", f"A job's creation to its latest task placed, in {ms}", JOB_LABELS
        )
        self.job_start = ValueVec(
            "volcano_e2e_job_scheduling_start_time", "A job's creation time, Unix seconds", JOB_LABELS
        )
        self.job_last = ValueVec(
            "volcano_e2e_job_scheduling_last_time", "When a task of the job was last placed, Unix seconds", JOB_LABELS
        )
        self.attempts = ValueVec(
            "volcano_schedule_attempts_total",
            "Attempts to schedule pods by result: scheduled, unschedulable (fits nowhere) "
            "or error (the scheduler or the API server failed)",
            ("result",),
            "counter",
        )
        self.victims = ValueVec("volcano_pod_preemption_victims", "Pods evicted by the latest preemption")
        self.preemption_attempts = ValueVec(
            "volcano_total_preemption_attempts", "Preemptor tasks that looked for victims", kind="counter"
        )
        self.evictions = ValueVec(
            "volcano_eviction_transactions_total",
            "Committed statements that evicted pods, by action",
            ("action",),
            "counter",
        )
        self.unready_tasks = ValueVec(
            "volcano_unschedule_task_count", "Tasks a job still needs placed to be ready", ("job_id",)
        )
        self.unready_jobs = ValueVec("volcano_unschedule_job_count", "Jobs left unready by the latest session")
        self.job_retries = ValueVec(
            "volcano_job_retry_counts", "Sessions that left the job unready", ("job_id",), "counter"
        )
        self.decision = HistogramVec(
            "runtimekit_scheduler_decision_seconds",
            "One pod placed by allocate (predicates, scores, device choice), in seconds, "
            "by the placement policy that chose its GPUs",
            ("policy",),
            DECISION_BUCKETS,
        )
        self.sessions = ValueVec("runtimekit_scheduler_sessions_total", "Scheduling sessions run", kind="counter")
        self._unready_now = 0
        # job key -> (JOB_LABELS values, creation time, ms from creation to latest placement, its
        # time): the job gauges' values, made into series at scrape time (`_job_series`)
        self._placed_jobs: dict[str, tuple[tuple[str, str, str], float, float, float]] = {}
        self._closed_jobs: dict[str, tuple[tuple[str, str, str], float]] = {}
        self._lock = threading.Lock()

    # -- the framework's Observer ------------------------------------------------------------
    def session_opened(self, seconds: float) -> None:
        self.open_session.observe(seconds * 1000)

    def plugin_done(self, plugin: str, hook: str, seconds: float) -> None:
        self.plugin.observe(seconds * 1000, plugin, hook)

    def action_done(self, action: str, seconds: float) -> None:
        self.action.observe(seconds * 1000, action)

    def session_done(self, seconds: float) -> None:
        self.e2e.observe(seconds * 1000)
        self.sessions.add(1)
        with self._lock:
            unready, self._unready_now = self._unready_now, 0
        self.unready_jobs.set(unready)

    def stage_done(self, stage: str, seconds: float) -> None:
        self.stage.observe(seconds * 1000, stage)

    def decided(self, policy: str, seconds: float) -> None:
        self.decision.observe(seconds, policy)

    def preemption_attempt(self) -> None:
        self.preemption_attempts.add(1)

    def evicted(self, action: str, victims: int) -> None:
        self.evictions.add(1, action)
        if action == "preempt":
            self.victims.set(victims)

    # -- what the wrappers report --------------------------------------------------------------
    def task_reached(self, stage: str, task: TaskInfo) -> None:
        """A task reached `stage`; timed from its pod's creation (skipped when that is unknown)."""
        if task.created > 0:
            self.task.observe(max(0.0, self.clock() - task.created) * 1000, stage)

    def job_placed(self, job: JobInfo, tasks: int) -> None:
        """`tasks` tasks of the job were placed this session (Volcano observes once per task)."""
        now = self.clock()
        elapsed = max(0.0, now - job.created) * 1000
        labels = (job.name, job.queue, job.namespace)
        self._placed_jobs[job.key] = (labels, float(int(job.created)), elapsed, float(int(now)))
        for _ in range(tasks):
            self.job_latency.observe(elapsed)

    def job_closed(self, job: JobInfo, unready: int) -> None:
        """At session close: how many tasks the job still needs placed to be ready."""
        self._closed_jobs[job.key] = ((job.name, job.queue, job.namespace), float(int(job.created)))
        self.unready_tasks.set(unready, job.name)
        if unready:
            self.job_retries.add(1, job.name)
            with self._lock:
                self._unready_now += 1

    # -- scrape ------------------------------------------------------------------------------
    def families(self) -> tuple[HistogramVec | ValueVec, ...]:
        return tuple(v for v in vars(self).values() if isinstance(v, HistogramVec | ValueVec))

    def collect(self) -> Iterator[Metric]:
        self._job_series()
        for family in self.families():
            yield from family.collect()

    def _job_series(self) -> None:
        """The per-job gauges from what the sessions recorded (kept as plain records, one dict store
        per job and session, and turned into series here): jobs deleted since go, as Volcano
        deletes their series with the job."""
        alive = set(self.jobs()) if self.jobs is not None else None
        if alive is not None:
            for records in (self._placed_jobs, self._closed_jobs):
                for key in [k for k in list(records) if k not in alive]:  # a copy: a session may add meanwhile
                    records.pop(key, None)
        placed = dict(self._placed_jobs)  # one copy each: the scheduling thread may add meanwhile
        closed = dict(self._closed_jobs)
        starts = dict(closed.values())
        starts.update((labels, start) for labels, start, _, _ in placed.values())
        self.job_start.replace(starts.items())
        self.job_duration.replace((labels, elapsed) for labels, _, elapsed, _ in placed.values())
        self.job_last.replace((labels, last) for labels, _, _, last in placed.values())
        if alive is not None:
            names = [(labels[0],) for labels in starts]
            self.unready_tasks.retain(names)
            self.job_retries.retain(names)


class ObservedCache:
    """A session's cache that reports allocations and session outcomes to `metrics` (see the module
    docstring); everything else is the wrapped cache's."""

    def __init__(self, cache: Cache, metrics: SchedulerMetrics) -> None:
        self.cache, self.metrics = cache, metrics
        self._placed: dict[str, int] = {}  # job key -> tasks placed this session

    def snapshot(self) -> Snapshot:
        self._placed.clear()
        return self.cache.snapshot()

    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks, group: BindGroup | None = None) -> None:
        self.metrics.task_reached(ASSUMED, task)
        self._placed[task.job] = self._placed.get(task.job, 0) + 1
        if group is None:
            self.cache.bind(task, choice, hooks)
        else:
            self.cache.bind(task, choice, hooks, group)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.cache.evict(task, reason)

    def job_updated(self, job: JobInfo) -> None:
        placed = self._placed.pop(job.key, 0)
        if placed:
            self.metrics.job_placed(job, placed)
        failed = [job.fit_errors[t.key] for t in job.pending if t.key in job.fit_errors]
        errors = sum(
            1 for f in failed if isinstance(f, FitErrors) and f.status is not None and f.status.code is Code.ERROR
        )
        if errors:
            self.metrics.attempts.add(errors, ERROR)
        if len(failed) > errors:
            self.metrics.attempts.add(len(failed) - errors, UNSCHEDULABLE)
        unready = max(0, job.min_member - job.ready_count() - job.waiting_count()) if failed else 0
        self.metrics.job_closed(job, unready)
        self.cache.job_updated(job)


class ObservedBinder:
    """A binder that reports each binding's outcome and round trip to `metrics`."""

    def __init__(self, binder: Binder, metrics: SchedulerMetrics) -> None:
        self.binder, self.metrics = binder, metrics

    def bind(
        self, task: TaskInfo, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        started = time.perf_counter()
        try:
            self.binder.bind(task, node, annotations, labels)
        except Exception:
            self.metrics.attempts.add(1, ERROR)
            raise
        self.metrics.stage.observe((time.perf_counter() - started) * 1000, STAGE_BIND)
        self.metrics.task_reached(BOUND, task)
        self.metrics.attempts.add(1, SCHEDULED)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.binder.evict(task, reason)

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        self.binder.event(task, kind, reason, message)

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        self.binder.report(task, scheduled, reason, message)

    def update_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        self.binder.update_group(namespace, name, status)

    def update_queue(self, name: str, status: QueueStatus) -> None:
        self.binder.update_queue(name, status)
