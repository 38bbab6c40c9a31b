"""The live scheduler cache: fed by informer events, it keeps the GPU ledger, the pending tasks of
this scheduler, the running tasks of every scheduler, pod groups and queues; it hands sessions
snapshots and carries out their decisions through a `Binder` (the API server in production).

Booking rules (ARCHITECTURE §2, §4):
- a pod bound to a node holds its CPU, memory and, from its assignment annotation, its GPU shares
  until it is deleted or terminates; a restarted scheduler rebuilds exactly this from the objects;
- a pod this scheduler binds is booked at once ("assumed"), before the API server answers; a
  failed bind gives the booking back and retries the pod after a backoff;
- a booking that would over-commit (two pods claiming the same GPU share) is refused and reported,
  never double-booked.
Unschedulable pods are retried when something that could help changes (a pod leaves, a node or
queue changes), or after `retry_seconds`, not in a busy loop. Thread-safe: informer threads, the
scheduling thread and the binder threads share it under one lock.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from runtimekit.model import (
    Assignment,
    GpuShare,
    Ledger,
    LedgerError,
    NodeName,
    Placement,
    PodKey,
    placement_from_assignment,
    shares_for,
)
from runtimekit.model.ledger import IntArray
from runtimekit.model.scalars import combine
from runtimekit.protocol import Protocol as KitProtocol
from runtimekit.scheduler.cache.objects import (
    NodeState,
    assignment_of,
    is_deleting,
    is_terminated,
    job_key,
    key_of,
    meta,
    node_state,
    queue_info,
    queue_of,
    task_from_pod,
)
from runtimekit.scheduler.framework.info import (
    DEFAULT_QUEUE,
    JobInfo,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    Snapshot,
    TaskInfo,
    TaskStatus,
)
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.framework.status import Code, FitErrors

log = logging.getLogger(__name__)
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

    def update_group(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Write a PodGroup's status (phase, counts, conditions)."""


@dataclass
class _Job:
    key: JobKey
    namespace: str
    name: str
    group: dict[str, Any] | None = None  # the PodGroup object, when there is one
    members: set[PodKey] = field(default_factory=set)
    grouped: bool = False  # its pods name a PodGroup (which may not have arrived yet)
    phase: str = ""
    reported: str = ""


@dataclass
class _Pending:
    task: TaskInfo
    failed_generation: int = -1  # generation at the last failed attempt (-1: never failed)
    failed_at: float = 0.0
    not_before: float = 0.0  # backoff after a failed bind or an error
    attempts: int = 0
    errors: int = 0  # sessions in a row that failed the pod with an error (not a misfit)
    reported: str = ""


class LiveCache:
    def __init__(
        self,
        protocol: KitProtocol,
        scheduler_name: str,
        binder: Binder,
        clock: Callable[[], float] = time.time,
        retry_seconds: float = 30.0,
        bind_workers: int = 8,
        include_running: bool = False,
        rank_seed: int = 0,
    ) -> None:
        self.protocol, self.scheduler_name, self.binder, self.clock = protocol, scheduler_name, binder, clock
        self.retry_seconds = retry_seconds
        self.include_running = include_running  # preempt/reclaim need every running task
        self.rank_seed = rank_seed
        self.lock = threading.RLock()
        self.work = threading.Event()  # set when there may be something to schedule
        self.ledger = Ledger()
        self.nodes: dict[NodeName, NodeState] = {}
        self.meta_rows: list[NodeMeta | None] = []
        self.meta_version = 0
        self.generation = 0  # bumped when something that could help a waiting pod changes
        self.pending: dict[PodKey, _Pending] = {}
        self.running: dict[PodKey, TaskInfo] = {}  # bound pods holding resources
        self.uid_of: dict[str, PodKey] = {}  # namespace/name -> key
        self.orphans: dict[PodKey, Mapping[str, Any]] = {}  # bound pods whose node is not known yet
        self.jobs: dict[JobKey, _Job] = {}
        self.groups: dict[str, dict[str, Any]] = {}  # namespace/name -> PodGroup
        self.queues: dict[str, QueueInfo] = {}
        self.queue_allocated: dict[str, Resources] = {}
        self.conflicts: dict[PodKey, str] = {}
        self.assumed: dict[PodKey, float] = {}
        self.bound_count = 0
        self.bind_failures = 0
        self._rank_cache: tuple[int, IntArray] | None = None
        self._pool = ThreadPoolExecutor(bind_workers, thread_name_prefix="binder")
        self._inflight: set[Future[None]] = set()
        # Binds of one node go out one after another, in assume order: kubelet admits the pods it hears
        # of in that order, and the device plugin matches kubelet's Allocate to the oldest pod.
        self._node_binds: dict[NodeName, deque[tuple[TaskInfo, dict[str, str]]]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

    # -- nodes -----------------------------------------------------------------------------
    def on_node(self, kind: str, obj: Mapping[str, Any]) -> None:
        name = NodeName(str(meta(obj).get("name", "")))
        with self.lock:
            if kind == "DELETED":
                self._remove_node(name)
            else:
                self._set_node(node_state(obj, self.protocol))
            self._bump()

    def _set_node(self, state: NodeState) -> None:
        if state.problem:
            log.warning("node %s: %s", state.meta.name, state.problem)
        dropped = self.ledger.set_node(state.inventory, state.capacity)
        for pod, reason in dropped:
            self.conflicts[pod] = reason
            log.error("node %s changed under pod %s: %s", state.meta.name, pod, reason)
        row = self.ledger.table.row(state.meta.name)
        self.meta_rows.extend([None] * (row + 1 - len(self.meta_rows)))
        if self.meta_rows[row] != state.meta:
            self.meta_rows[row] = state.meta
            self.meta_version += 1
        self.nodes[state.meta.name] = state
        for pod in [p for p, o in self.orphans.items() if (o.get("spec") or {}).get("nodeName") == state.meta.name]:
            self._book_bound(self.orphans.pop(pod))

    def _remove_node(self, name: NodeName) -> None:
        if name not in self.nodes:
            return
        row = self.ledger.table.row(name)
        for pod in self.ledger.remove_node(name):
            task = self.running.pop(pod, None)
            if task is not None and task.pod is not None:
                self.orphans[pod] = task.pod
                self._account(task, -1)
        self.meta_rows[row] = None
        self.meta_version += 1
        del self.nodes[name]

    # -- pods ------------------------------------------------------------------------------
    def on_pod(self, kind: str, obj: Mapping[str, Any]) -> None:
        with self.lock:
            self._on_pod(kind, obj)

    def _on_pod(self, kind: str, obj: Mapping[str, Any]) -> None:
        name_key = key_of(obj)
        uid = PodKey(str(meta(obj).get("uid") or self.uid_of.get(name_key) or name_key))
        if kind == "DELETED" or is_terminated(obj):
            self._forget_pod(uid, name_key)
            return
        self.uid_of[name_key] = uid
        spec = obj.get("spec") or {}
        if spec.get("nodeName"):
            self.pending.pop(uid, None)
            self._book_bound(obj)
            return
        if spec.get("schedulerName", "default-scheduler") != self.scheduler_name or is_deleting(obj):
            return
        if uid in self.assumed:  # our bind is in flight; the event is older than it
            return
        entry = self.pending.get(uid)
        task = task_from_pod(obj, self.protocol)
        if entry is None:
            self.pending[uid] = _Pending(task)
            self._join(task, obj)
            self.work.set()
        else:
            entry.task = task

    def _join(self, task: TaskInfo, pod: Mapping[str, Any]) -> None:
        key, grouped = job_key(pod)
        job = self.jobs.get(key)
        if job is None:
            group_name = key.split("/", 1)[1] if grouped else task.name
            job = self.jobs[key] = _Job(key, task.namespace, group_name)
        if grouped:
            job.grouped = True
            job.group = self.groups.get(key)
        job.members.add(task.key)

    def _book_bound(self, pod: Mapping[str, Any]) -> None:
        node = NodeName(str((pod.get("spec") or {}).get("nodeName")))
        task = task_from_pod(pod, self.protocol)
        held = self.ledger.booking(task.key)
        if held is not None and held.node == node:
            self.assumed.pop(task.key, None)
            previous = self.running.get(task.key)
            task.placement, task.node = held, node
            task.status = TaskStatus.RELEASING if is_deleting(pod) else TaskStatus.RUNNING
            if previous is not None:
                self._account(previous, -1)
            self.running[task.key] = task
            self._account(task, +1)
            self._join(task, pod)
            return
        if held is not None:
            self._release(task.key)
        state = self.nodes.get(node)
        if state is None:
            self.orphans[task.key] = pod
            return
        assignment = assignment_of(pod, self.protocol)
        try:
            if assignment is not None and assignment.node == node:
                placement = placement_from_assignment(
                    assignment, state.inventory, task.request.cpu_milli, task.request.memory_mib
                )
            else:
                if task.request.uses_gpu:
                    log.warning(
                        "pod %s on %s asks for GPUs but has no assignment of ours; booking CPU and memory only",
                        key_of(pod),
                        node,
                    )
                placement = Placement(node, task.request.cpu_milli, task.request.memory_mib)
            if task.request.scalars:  # extended resources, storage and huge pages are held too
                placement = replace(placement, scalars=task.request.scalars)
            self.ledger.reserve(task.key, placement, allow_unusable=True)
        except LedgerError as exc:
            self.conflicts[task.key] = str(exc)
            log.error("pod %s on %s cannot be booked: %s", key_of(pod), node, exc)
            return
        self.conflicts.pop(task.key, None)
        task.placement, task.node = placement, node
        task.status = TaskStatus.RELEASING if is_deleting(pod) else TaskStatus.RUNNING
        self.running[task.key] = task
        self._account(task, +1)
        self._join(task, pod)

    def _account(self, task: TaskInfo, sign: int) -> None:
        job = self.jobs.get(task.job)
        queue = queue_of(task.pod or {}, job.group if job else None)
        current = self.queue_allocated.get(queue, Resources())
        delta = task.resources
        self.queue_allocated[queue] = current + delta if sign > 0 else current - delta

    def _release(self, uid: PodKey) -> None:
        task = self.running.pop(uid, None)
        if task is not None:
            self._account(task, -1)
        self.ledger.release(uid)

    def _forget_pod(self, uid: PodKey, name_key: str) -> None:
        self.uid_of.pop(name_key, None)
        self.orphans.pop(uid, None)
        self.conflicts.pop(uid, None)
        if self.ledger.booking(uid) is not None or uid in self.running:
            self._release(uid)
            self.assumed.pop(uid, None)
            self._bump()
        self.pending.pop(uid, None)
        for job in self.jobs.values():
            if uid in job.members:
                job.members.discard(uid)
                if not job.members and job.group is None:
                    self.jobs.pop(job.key, None)
                break

    # -- groups and queues -----------------------------------------------------------------
    def on_podgroup(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = key_of(obj)
        with self.lock:
            if kind == "DELETED":
                self.groups.pop(key, None)
                job = self.jobs.get(JobKey(key))
                if job is not None:
                    job.group = None
            else:
                self.groups[key] = dict(obj)
                job = self.jobs.get(JobKey(key))
                if job is None:
                    namespace, _, name = key.partition("/")
                    job = self.jobs[JobKey(key)] = _Job(JobKey(key), namespace, name)
                job.group = dict(obj)
                job.phase = str((obj.get("status") or {}).get("phase") or "")
            self._bump()

    def on_queue(self, kind: str, obj: Mapping[str, Any]) -> None:
        name = str(meta(obj).get("name", ""))
        with self.lock:
            if kind == "DELETED":
                self.queues.pop(name, None)
            else:
                self.queues[name] = queue_info(obj, self.protocol)
            self._bump()

    def _bump(self) -> None:
        self.generation += 1
        self.work.set()

    # -- snapshots -------------------------------------------------------------------------
    def _rank(self) -> IntArray:
        rows = self.ledger.table.rows
        if self._rank_cache is None or self._rank_cache[0] != rows:
            self._rank_cache = (rows, np.random.default_rng(self.rank_seed).permutation(max(rows, 1))[:rows])
        return self._rank_cache[1]

    def _eligible(self, entry: _Pending, now: float) -> bool:
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
        return snapshot

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
            if not queues:
                queues[DEFAULT_QUEUE] = QueueInfo(DEFAULT_QUEUE)
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
            )

    def _job_info(self, job: _Job) -> JobInfo:
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
        queue = queue_of(members[0].pod or {} if members else {}, job.group)
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
        )

    # -- decisions -------------------------------------------------------------------------
    def assignment_for(self, task: TaskInfo, choice: DeviceChoice) -> Assignment:
        assert task.node is not None
        inventory = self.nodes[task.node].inventory
        containers: dict[str, tuple[GpuShare, ...]] = {
            name: shares_for(slots, inventory) for name, slots in choice.containers
        }
        return Assignment(task.node, containers, choice.policy)

    def bind(self, task: TaskInfo, choice: DeviceChoice) -> None:
        assert task.placement is not None
        assert task.node is not None
        with self.lock:
            entry = self.pending.get(task.key)
            if entry is None or task.key in self.assumed:  # deleted, bound meanwhile, or a bind in flight
                return
            try:
                self.ledger.reserve(task.key, task.placement)
            except LedgerError as exc:
                # the cluster changed since the snapshot: try again in the next session
                entry.failed_generation = -1
                log.info("pod %s/%s: %s; retrying", task.namespace, task.name, exc)
                self.work.set()
                return
            self.assumed[task.key] = self.clock()
            annotations = {self.protocol.annotations.assume_time: str(time.time_ns())}
            if choice.containers:
                annotations[self.protocol.annotations.assignment] = self.assignment_for(task, choice).to_annotation()
            entry.attempts += 1
            bound_task = entry.task.clone()
            bound_task.node, bound_task.placement = task.node, task.placement
            queue = self._node_binds.get(task.node)
            if queue is not None:  # the node's worker is busy: it takes this one next
                queue.append((bound_task, dict(annotations)))
                return
            self._node_binds[task.node] = deque([(bound_task, dict(annotations))])
            future = self._pool.submit(self._bind_node, task.node)
            self._inflight.add(future)
        future.add_done_callback(self._done)

    def _bind_node(self, node: NodeName) -> None:
        """Bind a node's queued pods in order until its queue is empty."""
        while True:
            with self.lock:
                queue = self._node_binds[node]
                if not queue:
                    del self._node_binds[node]
                    return
                task, annotations = queue.popleft()
            try:
                self._bind_one(task, annotations)
            except Exception:  # never leave the node's queue without a worker
                log.exception("binding %s/%s failed unexpectedly", task.namespace, task.name)

    def _done(self, future: Future[None]) -> None:
        with self.lock:
            self._inflight.discard(future)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every bind in flight has finished (tests, shutdown)."""
        with self.lock:
            waiting = list(self._inflight)
        _done, not_done = wait(waiting, timeout)
        return not not_done

    def _bind_one(self, task: TaskInfo, annotations: dict[str, str]) -> None:
        assert task.node is not None
        try:
            self.binder.bind(task, task.node, annotations)
        except Exception as exc:
            with self.lock:
                self.bind_failures += 1
                self.assumed.pop(task.key, None)
                if self.ledger.booking(task.key) is not None and task.key not in self.running:
                    self.ledger.release(task.key)
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
                                "lastTransitionTime": _rfc3339(now),
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

    # -- introspection ---------------------------------------------------------------------
    def booked(self) -> dict[PodKey, Placement]:
        with self.lock:
            return dict(self.ledger.bookings())

    def recompute(self) -> Ledger:
        """A ledger rebuilt from the node and pod objects as last seen (for checks and tests)."""
        with self.lock:
            pods = [(k, t.placement) for k, t in self.running.items() if t.placement is not None]
            pods += [(k, p) for k, p in self.ledger.bookings().items() if k in self.assumed]
            ledger, _ = Ledger.rebuild(((s.inventory, s.capacity) for s in self.nodes.values()), pods)
            return ledger


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
