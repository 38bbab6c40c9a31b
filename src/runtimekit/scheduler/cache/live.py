"""The live scheduler cache: the cluster book (book.py, fed by informer events) plus what sessions
need of it: snapshots to work on, and their decisions carried out through a `Binder` (the API
server in production).

- a pod this scheduler binds is booked at once ("assumed"), before the API server answers; a
  failed bind gives the booking back and retries the pod after a backoff;
- a pod failed by an error (not a misfit) is retried after a back-off whatever changes;
- with a `signer`, the assignment annotation of every bind is signed over the pod's UID and the
  annotation's text (`runtimekit.model.authority`); device plugins refuse unsigned assignments.
Unschedulable pods are retried when something that could help changes (a pod leaves, a node or
queue changes), or after `retry_seconds`, not in a busy loop. Thread-safe: informer threads, the
scheduling thread and the binder threads share it under one lock.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from runtimekit.base.timestamps import rfc3339
from runtimekit.model import (
    LedgerError,
    NodeName,
)
from runtimekit.model.authority import Signer, sign_assignment
from runtimekit.model.ledger import IntArray
from runtimekit.model.scalars import combine
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.book import ClusterBook, JobState, PendingPod
from runtimekit.scheduler.cache.objects import queue_of
from runtimekit.scheduler.cache.policy import add_usage, quota_request, waiting_time
from runtimekit.scheduler.cache.queues import ALWAYS, changed, queue_status
from runtimekit.scheduler.framework.binding import BindHooks, Binding
from runtimekit.scheduler.framework.info import (
    JobInfo,
    JobKey,
    QueueInfo,
    Resources,
    Snapshot,
    TaskInfo,
    TaskStatus,
)
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.framework.policy import NamespaceQuota
from runtimekit.scheduler.framework.status import Code, FitErrors

log = logging.getLogger(__name__)
BINDER_IDLE_S = 30.0  # a binder thread with nothing to do this long ends (another starts when needed)
PEER_NAME_REASON = "UnsupportedName"  # the Event reason of a peer's name the protocol does not read
INITIAL_BACKOFF_S, MAX_BACKOFF_S = 1.0, 10.0  # kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds


class BindError(Exception):
    """The API server refused a bind (or could not be reached); the message says why."""


class Binder(Protocol):
    """How committed decisions reach the cluster (the API server in production, a fake in tests)."""

    def bind(self, task: TaskInfo, node: str, annotations: Mapping[str, str]) -> None:
        """Bind the pod to the node, writing the annotations; raise BindError on failure."""

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Delete the pod (gracefully) to free its resources."""

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        """Record an event on the pod and set its PodScheduled condition."""

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        """Record an event on the pod, nothing else."""

    def update_group(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Write a PodGroup's status (phase, counts, conditions)."""

    def update_queue(self, name: str, status: Mapping[str, Any]) -> None:
        """Write a Queue's status (state, pod group counts, allocated)."""


class LiveCache(ClusterBook):
    def __init__(
        self,
        protocol: KitProtocol,
        scheduler_name: str | Collection[str],
        binder: Binder,
        clock: Callable[[], float] = time.time,
        retry_seconds: float = 30.0,
        bind_workers: int = 8,
        include_running: bool = False,
        rank_seed: int = 0,
        signer: Signer | None = None,
    ) -> None:
        super().__init__(protocol, scheduler_name, clock)
        self.binder = binder
        self.signer = signer
        self.retry_seconds = retry_seconds
        self.include_running = include_running  # preempt/reclaim need every running task
        self.rank_seed = rank_seed
        self.bound_count = 0
        self.bind_failures = 0
        self._rank_cache: tuple[int, IntArray] | None = None
        # Binder threads (up to bind_workers, started as nodes wait and ended when idle) take node
        # names off `_binds`; `_busy` counts the nodes with binds queued or in flight, and `_idle`
        # wakes `drain` when none are left.
        self._bind_workers = bind_workers
        self._binds: queue.SimpleQueue[NodeName | None] = queue.SimpleQueue()
        self._binder_threads: list[threading.Thread] = []
        self._busy = 0
        self._idle = threading.Condition(self.lock)
        # Binds of one node go out one after another, in assume order: kubelet admits the pods it hears
        # of in that order, and the device plugin matches kubelet's Allocate to the oldest pod.
        self._node_binds: dict[NodeName, deque[tuple[Binding, BindHooks]]] = {}
        self._queues_written: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        """Finish the binds in flight and stop the binder threads."""
        with self.lock:
            threads, self._binder_threads = self._binder_threads, []
        for _ in threads:
            self._binds.put(None)
        for thread in threads:
            thread.join()

    def _binder(self) -> None:
        """A binder thread: binds nodes' queues as they come; ends after BINDER_IDLE_S without work."""
        while True:
            try:
                node = self._binds.get(timeout=BINDER_IDLE_S)
            except queue.Empty:
                with self.lock:
                    if self._binds.empty():  # bind() starts another when work comes (under the lock)
                        if threading.current_thread() in self._binder_threads:
                            self._binder_threads.remove(threading.current_thread())
                        return
                continue
            if node is None:
                return
            try:
                self._bind_node(node)
            except Exception:  # never lose a binder thread
                log.exception("binder failed on node %s", node)

    # -- snapshots -------------------------------------------------------------------------
    def _rank(self) -> IntArray:
        rows = self.ledger.table.rows
        if self._rank_cache is None or self._rank_cache[0] != rows:
            self._rank_cache = (rows, np.random.default_rng(self.rank_seed).permutation(max(rows, 1))[:rows])
        return self._rank_cache[1]

    def _eligible(self, entry: PendingPod, now: float) -> bool:
        if now < entry.not_before or entry.task.key in self.assumed:  # backing off, or its bind is in flight
            return False
        return entry.failed_generation != self.generation or now - entry.failed_at >= self.retry_seconds

    def has_work(self) -> bool:
        with self.lock:
            now = self.clock()
            return any(self._eligible(e, now) for e in self.pending.values())

    def snapshot(self) -> Snapshot:
        missing_groups: list[tuple[TaskInfo, str]] = []
        snapshot = self._snapshot(missing_groups)
        for task, message in missing_groups:
            self._safe_report(task, False, "FailedScheduling", message)
        self.write_notices()
        return snapshot

    def write_notices(self) -> None:
        """Warn pods about peers' names the protocol does not read (each pod once, when first seen)."""
        with self.lock:
            notices, self.notices = self.notices, []
        for task, message in notices:
            try:
                self.binder.event(task, "Warning", PEER_NAME_REASON, message)
            except Exception as exc:
                log.warning("cannot warn pod %s/%s: %s", task.namespace, task.name, exc)

    def _snapshot(self, missing_groups: list[tuple[TaskInfo, str]]) -> Snapshot:
        with self.lock:
            now = self.clock()
            table = self.ledger.table.copy()
            jobs: dict[JobKey, JobInfo] = {}
            for job in self.jobs.values():
                waiting = [self.pending[m] for m in job.members if m in self.pending and m not in self.assumed]
                if job.grouped and job.group is None:  # a gang's pods before its PodGroup: wait for it
                    message = f"PodGroup {job.key} does not exist (yet); its pods wait for it"
                    for entry in waiting:
                        if entry.reported != message:
                            entry.reported = message
                            missing_groups.append((entry.task, message))
                    continue
                if not any(self._eligible(e, now) for e in waiting) and not (self.include_running and job.members):
                    continue
                info = self._job_info(job)
                for entry in waiting:
                    info.add(entry.task.clone())
                for member in job.members:
                    if member in self.running:
                        info.add(self.running[member].clone())
                    elif member in self.assumed and member in self.pending:  # bound by us, not yet confirmed
                        held = self.ledger.booking(member)
                        inflight = self.pending[member].task.clone()
                        inflight.status = TaskStatus.BINDING
                        inflight.placement, inflight.node = held, held.node if held else None
                        info.add(inflight)
                jobs[job.key] = info
            queues = {name: q.clone() for name, q in self.queues.items()}
            for name in (self.default_queue, *ALWAYS):  # Volcano always has them: a pod never waits for them
                queues.setdefault(name, QueueInfo(name))
            metas = list(self.meta_rows) + [None] * max(0, table.rows - len(self.meta_rows))
            names = sorted({m.gpu_model for m in metas if m is not None and m.gpu_model})
            index = {n: i for i, n in enumerate(names)}
            model_ids = np.array([index.get(m.gpu_model, -1) if m is not None else -1 for m in metas], np.int64)
            rows = table.active_rows()
            capacity = Resources(
                int(sum(self.nodes[n].capacity.cpu_milli for n in self.nodes)),
                int(sum(self.nodes[n].capacity.memory_mib for n in self.nodes)),
                int((table.gmem_total[rows] > 0).sum()) * 1000,
                functools.reduce(combine, (s.offered for s in self.nodes.values()), ()),
            )
            return Snapshot(
                table,
                metas,
                jobs,
                queues,
                self._rank(),
                model_ids,
                names,
                now,
                self.meta_version,
                capacity,
                dict(self.queue_allocated),
                self.pods.frozen(),
                budgets=tuple(self.budgets.values()),
                quotas=self._quotas(),
                pod_facts=self.pods.facts,
            )

    def _quotas(self) -> dict[str, tuple[NamespaceQuota, ...]]:
        """ResourceQuotas by namespace; where no quota controller has written `used`, what the
        namespace's bound pods use is worked out here (the embedded cluster has no such controller)."""
        out: dict[str, list[NamespaceQuota]] = {}
        for written in self.quotas.values():
            quota = written
            if quota.used is None:
                pods = (t.pod for t in self.running.values() if t.namespace == quota.namespace and t.pod is not None)
                quota = replace(quota, used=add_usage(pods))
            out.setdefault(quota.namespace, []).append(quota)
        return {namespace: tuple(quotas) for namespace, quotas in out.items()}

    def _job_info(self, job: JobState) -> JobInfo:
        group = job.group or {}
        spec = group.get("spec") or {}
        min_member = spec.get("minMember", 1) if job.group is not None else 1
        priority = 0
        members = [self.pending[m].task for m in job.members if m in self.pending] + [
            self.running[m] for m in job.members if m in self.running
        ]
        if members:
            priority = max(t.priority for t in members)
        created = min((t.created for t in members), default=0.0)
        queue = queue_of(members[0].pod or {} if members else {}, job.group, self.default_queue)
        phase = job.phase or ("Pending" if job.group is not None else "Inqueue")
        min_resources = None
        if job.group is not None and spec.get("minResources"):
            from runtimekit.scheduler.cache.objects import resources_of

            min_resources = resources_of(spec.get("minResources"), self.protocol)
        return JobInfo(
            job.key,
            job.namespace,
            job.name,
            queue=queue,
            min_member=min_member if isinstance(min_member, int) else 1,
            priority=priority,
            created=created,
            phase=phase,
            min_resources=min_resources,
            has_podgroup=job.group is not None,
            waiting_time=waiting_time(job.group),
            quota_request=quota_request(job.group),
        )

    # -- decisions -------------------------------------------------------------------------
    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks) -> None:
        assert task.placement is not None
        assert task.node is not None
        with self.lock:
            entry = self.pending.get(task.key)
            if entry is None or task.key in self.assumed:  # deleted, bound meanwhile, or a bind in flight
                entry = None
            else:
                try:
                    self.ledger.reserve(task.key, task.placement)
                except LedgerError as exc:
                    # the cluster changed since the snapshot: try again in the next session
                    entry.failed_generation = -1
                    log.info("pod %s/%s: %s; retrying", task.namespace, task.name, exc)
                    self.work.set()
                    entry = None
            if entry is not None:
                self.assumed[task.key] = self.clock()
                self.pods.add_pod(task.key, entry.task.pod, entry.task.namespace, task.node)
                entry.attempts += 1
                bound_task = entry.task.clone()
                bound_task.node, bound_task.placement = task.node, task.placement
                binding = Binding(
                    bound_task,
                    task.node,
                    choice,
                    {self.protocol.annotations.assume_time: str(time.time_ns())},
                )
                waiting = self._node_binds.get(task.node)
                if waiting is not None:  # the node's worker is busy: it takes this one next
                    waiting.append((binding, hooks))
                    return
                self._node_binds[task.node] = deque([(binding, hooks)])
                self._busy += 1
                threads = len(self._binder_threads)
                if threads < self._bind_workers and self._busy > threads:  # no thread is free
                    thread = threading.Thread(target=self._binder, name=f"binder_{self._busy}", daemon=True)
                    self._binder_threads.append(thread)
                    thread.start()
                self._binds.put(task.node)
        if entry is None:
            hooks.unreserve(task)


    def _bind_node(self, node: NodeName) -> None:
        """Bind a node's queued pods in order until its queue is empty."""
        while True:
            with self.lock:
                waiting = self._node_binds[node]
                if not waiting:
                    del self._node_binds[node]
                    self._busy -= 1
                    if not self._busy:
                        self._idle.notify_all()
                    return
                binding, hooks = waiting.popleft()
            try:
                self._bind_one(binding, hooks)
            except Exception:  # never leave the node's queue without a worker
                log.exception("binding %s/%s failed unexpectedly", binding.task.namespace, binding.task.name)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every bind in flight has finished (tests, shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy, timeout)

    def _bind_one(self, binding: Binding, hooks: BindHooks) -> None:
        """PreBind, then a Bind plugin or the binder; any failure gives the booking back, unreserves
        the task and retries it after a back-off."""
        task = binding.task
        assert task.node is not None
        try:
            status = hooks.pre_bind(binding)
            if not status.ok:
                raise BindError(status.message)
            if binding.devices:
                with self.lock:
                    node = self.nodes.get(task.node)
                if node is None:
                    raise BindError(f"node {task.node} is gone")
                text = binding.assignment(node.inventory).to_annotation()
                binding.annotations[self.protocol.annotations.assignment] = text
                if self.signer is not None:
                    signature = sign_assignment(self.signer, task.uid, text)
                    binding.annotations[self.protocol.annotations.assignment_signature] = signature
            status = hooks.bind(binding)
            if status.code is Code.SKIP:  # no Bind plugin took it: the binder posts it
                self.binder.bind(task, task.node, binding.annotations)
            elif not status.ok:
                raise BindError(status.message)
        except Exception as exc:
            hooks.unreserve(task)
            with self.lock:
                self.bind_failures += 1
                self.assumed.pop(task.key, None)
                if self.ledger.booking(task.key) is not None and task.key not in self.running:
                    self.ledger.release(task.key)
                    self.pods.remove(task.key)
                entry = self.pending.get(task.key)
                if entry is not None:
                    delay = min(60.0, 0.5 * 2 ** min(entry.attempts, 7))
                    entry.not_before = self.clock() + delay
                    entry.failed_generation = -1
                self.generation += 1
            log.warning("binding %s/%s to %s failed: %s", task.namespace, task.name, task.node, exc)
            self._safe_report(task, False, "FailedScheduling", f"binding rejected: {exc}")
            self.work.set()
            return
        with self.lock:
            self.bound_count += 1
            entry = self.pending.pop(task.key, None)
            if task.key not in self.running:
                task.status = TaskStatus.BOUND
                self.running[task.key] = task
                self._account(task, +1)
        self._safe_report(task, True, "Scheduled", f"Successfully assigned {task.namespace}/{task.name} to {task.node}")

    def _safe_report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        try:
            self.binder.report(task, scheduled, reason, message)
        except Exception as exc:
            log.info("could not record %s on %s/%s: %s", reason, task.namespace, task.name, exc)

    def evict(self, task: TaskInfo, reason: str) -> None:
        try:
            self.binder.evict(task, reason)
        except Exception as exc:
            log.warning("evicting %s/%s failed: %s", task.namespace, task.name, exc)

    def job_updated(self, job: JobInfo) -> None:
        now = self.clock()
        reports: list[tuple[TaskInfo, str]] = []
        group_status: dict[str, Any] | None = None
        with self.lock:
            for key, errors in job.fit_errors.items():
                entry = self.pending.get(key)
                if entry is None:
                    continue
                entry.failed_generation, entry.failed_at = self.generation, now
                failed = errors.status if isinstance(errors, FitErrors) else None
                if failed is not None and failed.code is Code.ERROR:  # retried after a back-off, whatever changes
                    entry.errors += 1
                    entry.not_before = now + min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2 ** (entry.errors - 1))
                    entry.failed_generation = -1
                else:
                    entry.errors = 0
                message = errors.message if isinstance(errors, FitErrors) else str(errors)
                if message != entry.reported:
                    entry.reported = message
                    reports.append((entry.task, message))
            state = self.jobs.get(job.key)
            if state is not None and state.group is not None:
                phase = job.phase
                ready = sum(
                    1
                    for t in job.tasks.values()
                    if t.status in (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)
                )
                if ready >= job.min_member:
                    phase = "Running"
                unschedulable = next(iter(job.fit_errors.values()), None)
                summary = f"{phase}:{ready}:{bool(unschedulable)}"
                if summary != state.reported:
                    state.reported, state.phase = summary, phase
                    conditions = []
                    if unschedulable is not None:
                        pending = len(job.fit_errors)
                        conditions.append(
                            {
                                "type": "Unschedulable",
                                "status": "True",
                                "reason": "NotEnoughResources",
                                "message": f"{pending}/{len(job.tasks)} tasks in gang unschedulable: "
                                f"{unschedulable.message if isinstance(unschedulable, FitErrors) else ''}",
                                "lastTransitionTime": rfc3339(now),
                            }
                        )
                    group_status = {"phase": phase, "running": ready, "conditions": conditions}
        for task, message in reports:
            self._safe_report(task, False, "FailedScheduling", message)
        if group_status is not None and job.has_podgroup:
            try:
                self.binder.update_group(job.namespace, job.name, group_status)
            except Exception as exc:
                log.info("could not update PodGroup %s: %s", job.key, exc)

    # -- queue status ----------------------------------------------------------------------
    def queue_statuses(self) -> dict[str, dict[str, Any]]:
        """Each Queue object's status as Volcano's queue controller reports it."""
        with self.lock:
            phases = self.job_phases(self.default_queue)
            return {
                name: queue_status(q.state, phases[name], self.queue_allocated.get(name, Resources()), self.protocol)
                for name, q in self.queues.items()
            }

    def sync_queues(self) -> int:
        """Write the statuses that changed since last written; returns how many were written."""
        fresh = changed(self._queues_written, self.queue_statuses())
        for name, status in fresh.items():
            try:
                self.binder.update_queue(name, status)
            except Exception as exc:
                log.info("could not update Queue %s: %s", name, exc)
                continue
            self._queues_written[name] = status
        return len(fresh)
