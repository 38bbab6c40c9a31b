"""The live scheduler's binder: carries out what sessions commit, through a `Binder` (the API server
in production, a fake in tests), as kube-scheduler's binding cycle does (schedule_one.go).

- A pod the cluster cache has assumed binds on a binder thread: its PreBind plugins, then its
  assignment annotation written from the node's GPUs and, with a `signer`, signed over the pod's
  UID and the annotation's text (`runtimekit.model.authority`; device plugins refuse unsigned
  assignments), under HAMi's names with HAMi's own annotations and label beside it
  (`runtimekit.model.hami`), then the first Bind plugin that does not skip, else `Binder.bind`. Any failure
  unreserves the pod (`BindHooks.unreserve`), gives its booking back (`ClusterCache.forget`), backs
  it off in the scheduling queue and moves the queue's unschedulable pods (the booking given back
  may help them), in one step under the cache's lock.
- A node's pods bind one after another in the order they were assumed: kubelet admits the pods it
  hears of in that order, and the device plugin matches kubelet's Allocate to the oldest pod.
- The members of a gang committed together (`BindGroup`) run their PreBinds first; a member whose
  PreBind succeeded is held (no thread waits) until every member's has, then all bind; when one
  fails (or could not be assumed), every member is given back as a failed bind is, so a gang is
  never bound in part for want of its volumes.
- PreBind plugins reach the cluster's volumes through the binding (`Binding.volumes`, the pool's
  `volumes`).
- Evictions and status writes (why a pod waits, peer names a pod carries, PodGroup and Queue
  status) go out on the caller's thread; a failure is logged, never raised.

Up to `workers` binder threads, started as nodes wait and ended after `BINDER_IDLE_S` without work.
The binder's own `lock` guards its per-node queues and threads only; it is never held while the
cache's lock is taken or the API server is called, so the two locks never nest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Protocol

from runtimekit.kube.objects import PodGroupStatus, QueueStatus
from runtimekit.model import NodeName, PodKey, hami
from runtimekit.model.authority import Signer, sign_assignment
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import speaks_hami
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.queues import changed
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks, Binding, ClaimAccess, VolumeAccess
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.status import Code
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.scheduling_queue import SchedulingQueue

log = logging.getLogger(__name__)
BINDER_IDLE_S = 30.0  # a binder thread with nothing to do this long ends (another starts when needed)


class BindError(Exception):
    """The API server refused a bind (or could not be reached); the message says why."""


class Binder(Protocol):
    """How committed decisions reach the cluster (the API server in production, a fake in tests)."""

    def bind(
        self, task: TaskInfo, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        """Bind the pod to the node, writing the annotations (and labels, when given, before it); raise
        BindError on failure."""

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Delete the pod (gracefully) to free its resources."""

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        """Record an event on the pod and set its PodScheduled condition."""

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        """Record an event on the pod, nothing else."""

    def update_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        """Write a PodGroup's status (phase, counts, conditions)."""

    def update_queue(self, name: str, status: QueueStatus) -> None:
        """Write a Queue's status (state, pod group counts, allocated)."""


@dataclass(slots=True)
class _Item:
    """A bind waiting in its node's queue: the binding, the plugins' hooks, its gang's group, and
    whether its PreBind already ran (a gang member sent back to bind)."""

    binding: Binding
    hooks: BindHooks
    group: BindGroup | None = None
    pre_bound: bool = False


class BinderPool:
    def __init__(
        self,
        binder: Binder,
        cache: ClusterCache,
        queue: SchedulingQueue,
        workers: int = 8,
        signer: Signer | None = None,
        volumes: VolumeAccess | None = None,
    ) -> None:
        self.binder, self.cache, self.queue = binder, cache, queue
        self.protocol: KitProtocol = cache.protocol
        self.hami = speaks_hami(self.protocol)  # HAMi's names: its own annotations are written too
        self.signer = signer
        # told each assignment the signer signs (`SignatureCheck.vouch`), so the bound pod's event
        # need not check that signature again
        self.vouch: Callable[[str, str, str], None] | None = None
        self.volumes = volumes  # handed to PreBind plugins on every binding
        self.claims: ClaimAccess | None = None  # ResourceClaims, handed to PreBind plugins likewise
        self.bound_count = 0
        self.bind_failures = 0
        self.lock = threading.Lock()
        # Binder threads (up to `workers`, started as nodes wait and ended when idle) take node names
        # off `_binds`; `_busy` counts the nodes with binds queued or in flight, and `_idle` wakes
        # `drain` when none are left.
        self._workers = workers
        self._binds: SimpleQueue[NodeName | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._idle = threading.Condition(self.lock)
        self._node_binds: dict[NodeName, deque[_Item]] = {}
        self._held: dict[PodKey, _Item] = {}  # gang members whose PreBind succeeded, waiting for the others
        self._queues_written: dict[str, QueueStatus] = {}

    # -- binds -----------------------------------------------------------------------------
    def submit(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks, group: BindGroup | None = None) -> None:
        """Bind an assumed pod (`task` as it will be bound: node and placement set) after the binds
        queued for its node; a member of a `group` binds with its group (see the module docstring)."""
        self._enqueue(_Item(self._binding(task, choice), hooks, group))

    def bind_now(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks) -> str | None:
        """Bind an assumed pod on the caller's thread, as a binder thread would (the extender's bind
        verb, which answers only once the pod is bound): None when bound, else why not (the failure
        is handled as on a binder thread)."""
        binding = self._binding(task, choice)
        try:
            self._pre_bind(binding, hooks)
            self._bind(binding, hooks)
        except Exception as exc:
            self._failed(binding, hooks, exc)
            return str(exc) or type(exc).__name__
        self._bound(binding)
        return None

    def _binding(self, task: TaskInfo, choice: DeviceChoice) -> Binding:
        assert task.node is not None
        stamp = {self.protocol.annotations.assume_time: str(time.time_ns())}
        return Binding(task, task.node, choice, stamp, volumes=self.volumes, claims=self.claims)

    def abandon(self, task: TaskInfo, group: BindGroup) -> None:
        """A member of `group` could not be assumed (the caller unreserved it): its group fails."""
        self._settle(task.key, group, None, RuntimeError(f"gang member {task.namespace}/{task.name} was not assumed"))

    def _enqueue(self, item: _Item) -> None:
        node = item.binding.node
        with self.lock:
            waiting = self._node_binds.get(node)
            if waiting is not None:  # the node's worker is busy: it takes this one next
                waiting.append(item)
                return
            self._node_binds[node] = deque([item])
            self._busy += 1
            threads = len(self._threads)
            if threads < self._workers and self._busy > threads:  # no thread is free
                thread = threading.Thread(target=self._run, name=f"binder_{self._busy}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._binds.put(node)

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every bind in flight has finished (tests, shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy and not self._held, timeout)

    def close(self) -> None:
        """Finish the binds in flight and stop the binder threads."""
        with self.lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._binds.put(None)
        for thread in threads:
            thread.join()

    def _run(self) -> None:
        """A binder thread: binds nodes' queues as they come; ends after BINDER_IDLE_S without work."""
        while True:
            try:
                node = self._binds.get(timeout=BINDER_IDLE_S)
            except Empty:
                with self.lock:
                    if self._binds.empty():  # submit() starts another when work comes (under the lock)
                        if threading.current_thread() in self._threads:
                            self._threads.remove(threading.current_thread())
                        return
                continue
            if node is None:
                return
            try:
                self._bind_node(node)
            except Exception:  # never lose a binder thread
                log.exception("binder failed on node %s", node)

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
                item = waiting.popleft()
            try:
                self._bind_one(item)
            except Exception:  # never leave the node's queue without a worker
                binding = item.binding
                log.exception("binding %s/%s failed unexpectedly", binding.task.namespace, binding.task.name)

    def _bind_one(self, item: _Item) -> None:
        """PreBind, then a Bind plugin or the binder; any failure gives the booking back, unreserves
        the task and retries it after a back-off. A gang member runs its PreBind and waits for its
        group (`_settle`), which sends it back through its node's queue to bind (`pre_bound`)."""
        binding, hooks, group = item.binding, item.hooks, item.group
        if not item.pre_bound:
            try:
                self._pre_bind(binding, hooks)
            except Exception as exc:
                if group is None:
                    self._failed(binding, hooks, exc)
                else:
                    self._settle(binding.task.key, group, item, exc)
                return
            if group is not None:
                self._settle(binding.task.key, group, item, None)
                return
        try:
            self._bind(binding, hooks)
        except Exception as exc:
            self._failed(binding, hooks, exc)
            return
        self._bound(binding)

    def _pre_bind(self, binding: Binding, hooks: BindHooks) -> None:
        status = hooks.pre_bind(binding)
        if not status.ok:
            raise BindError(status.message)
        if binding.devices:
            self._write_assignment(binding)

    def _bind(self, binding: Binding, hooks: BindHooks) -> None:
        task = binding.task
        assert task.node is not None
        status = hooks.bind(binding)
        if status.code is Code.SKIP:  # no Bind plugin took it: the binder posts it
            self.binder.bind(task, task.node, binding.annotations, binding.labels or None)
        elif not status.ok:
            raise BindError(status.message)

    def _settle(self, key: PodKey, group: BindGroup, item: _Item | None, exc: Exception | None) -> None:
        """A gang member's PreBind ended (`exc` None: it succeeded): hold it, bind the whole group, or
        fail the members the group says to."""
        with self.lock:
            # counted under the pool's lock: a member counted but not yet held when the last one
            # settles on another thread would miss the group's bind (or failure) and stay held
            to_bind, to_fail = group.done(key, exc is None)
            if item is not None and exc is None and not to_bind and key not in to_fail:
                self._held[key] = item
            ready = [self._held.pop(k) for k in to_bind if k in self._held]
            if item is not None and exc is None and key in to_bind:
                ready.append(item)
            failing = [self._held.pop(k) for k in to_fail if k in self._held]
        if item is not None and key in to_fail:
            failing.append(item)
        for member in ready:
            self._enqueue(_Item(member.binding, member.hooks, None, pre_bound=True))
        cause = exc or BindError("its gang could not be bound")
        for member in failing:
            failed_member = member.binding.task
            why = cause if failed_member.key == key else BindError(f"gang member {key} failed: {cause}")
            self._failed(member.binding, member.hooks, why)
        with self._idle:
            if not self._busy and not self._held:
                self._idle.notify_all()

    def _failed(self, binding: Binding, hooks: BindHooks, exc: Exception) -> None:
        task = binding.task
        hooks.unreserve(task)
        with self.cache.lock:  # one step: a session sees the pod either binding or backing off
            self.cache.forget(task.key)
            self.queue.back_off(task.key)
            self.queue.move_all()
        with self.lock:
            self.bind_failures += 1
        log.warning("binding %s/%s to %s failed: %s", task.namespace, task.name, task.node, exc)
        self.report(task, False, "FailedScheduling", f"binding rejected: {exc}")

    def _bound(self, binding: Binding) -> None:
        task = binding.task
        self.cache.finish_binding(task)
        with self.lock:
            self.bound_count += 1
        self.report(task, True, "Scheduled", f"Successfully assigned {task.namespace}/{task.name} to {task.node}")

    def _write_assignment(self, binding: Binding) -> None:
        """The assignment annotation PreBind prepared, with the node's GPU UUIDs, and its signature."""
        inventory = self.cache.inventory(binding.node)
        if inventory is None:
            raise BindError(f"node {binding.node} is gone")
        assignment = binding.assignment(inventory)
        text = assignment.to_annotation()
        binding.annotations[self.protocol.annotations.assignment] = text
        if self.hami and binding.task.pod is not None:  # HAMi's own record, for its tools; never read back
            binding.annotations.update(hami.placed(binding.task.pod, assignment, int(time.time())))
            binding.labels.update(hami.node_label(assignment))
        if self.signer is not None:
            signature = sign_assignment(self.signer, binding.task.uid, text)
            binding.annotations[self.protocol.annotations.assignment_signature] = signature
            if self.vouch is not None:
                self.vouch(binding.task.uid, text, signature)

    # -- evictions and status writes -------------------------------------------------------
    def evict(self, task: TaskInfo, reason: str) -> None:
        try:
            self.binder.evict(task, reason)
        except Exception as exc:
            log.warning("evicting %s/%s failed: %s", task.namespace, task.name, exc)

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        """An Event on the pod and its PodScheduled condition."""
        try:
            self.binder.report(task, scheduled, reason, message)
        except Exception as exc:
            log.info("could not record %s on %s/%s: %s", reason, task.namespace, task.name, exc)

    def warn(self, notices: list[tuple[TaskInfo, str, str]]) -> None:
        """Warning Events, each (pod, reason, message): peers' names the protocol does not read,
        assignments the cache ignores."""
        for task, reason, message in notices:
            try:
                self.binder.event(task, "Warning", reason, message)
            except Exception as exc:
                log.warning("cannot warn pod %s/%s: %s", task.namespace, task.name, exc)

    def update_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        try:
            self.binder.update_group(namespace, name, status)
        except Exception as exc:
            log.info("could not update PodGroup %s/%s: %s", namespace, name, exc)

    def sync_queues(self, statuses: Mapping[str, QueueStatus]) -> int:
        """Write the Queue statuses that changed since last written; returns how many were written."""
        fresh = changed(self._queues_written, statuses)
        for name, status in fresh.items():
            try:
                self.binder.update_queue(name, status)
            except Exception as exc:
                log.info("could not update Queue %s: %s", name, exc)
                continue
            self._queues_written[name] = status
        return len(fresh)
