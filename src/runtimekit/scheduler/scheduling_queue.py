"""The live scheduler's scheduling queue: the pending pods of this scheduler and where each stands, as
kube-scheduler's `internal/queue` keeps them (activeQ, podBackoffQ, unschedulablePods), with the
events that move them. A pending pod is

- *active*: the next session tries it;
- *backing off* until `not_before`, after an error (`ERROR_BACKOFF`, kube-scheduler's
  podInitialBackoffSeconds=1 doubling to podMaxBackoffSeconds=10, by errors in a row) or after a
  failed bind (`BIND_BACKOFF`, 1 s doubling to 60 s, by binds tried); it is active again when that
  time comes, whatever changes;
- *unschedulable* after a session found no node for it: until something that could help changes
  (`move_all`: a bound pod leaves, a node, namespace, Queue, ResourceQuota or PodGroup changes, a
  bind fails and gives its booking back) or until `retry_seconds` pass (kube-scheduler's flush of
  unschedulablePods), never in a busy loop;
- *binding* while the cluster cache has assumed it and a binder thread binds it.

A move of every unschedulable pod is one step, not a pass over them: the queue counts moves
(`generation`) and a pod stays unschedulable only while the count it failed at is current. A pod
may back off and be unschedulable at once (a gang's member tried with its siblings before its
back-off ended); it is active when neither holds. A pod stays in the queue while it binds, since a
session sees it (as binding) in its job.

Callers: the cluster cache (pods arrive, change, are assumed, bound or deleted; cluster changes move
unschedulable pods), the binder (a failed bind backs its pod off), the live cache (a session's
outcomes) and the scheduling loop (`work`, `has_work`). Every method runs under `lock`, which the
cluster cache shares: a pod passes between the queue and the cache (pending, assumed, bound) in one
step that a session's snapshot must never see half done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from runtimekit.base.backoff import Backoff
from runtimekit.model import PodKey
from runtimekit.scheduler.framework.info import TaskInfo

ERROR_BACKOFF = Backoff(initial=1.0, maximum=10.0)  # n-th error in a row: 1 s * 2**(n-1), at most 10 s
BIND_BACKOFF = Backoff(initial=0.5, maximum=60.0)  # after n binds tried: 0.5 s * 2**n, at most 60 s


class QueueState(Enum):
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    BINDING = "binding"


@dataclass
class PendingPod:
    task: TaskInfo
    failed_generation: int = -1  # the queue's generation at its last misfit (-1: none since the last move)
    failed_at: float = 0.0
    not_before: float = 0.0  # backing off until then
    attempts: int = 0  # binds tried
    errors: int = 0  # sessions in a row that failed the pod with an error (not a misfit)
    reported: str = ""  # the last reason written on the pod
    binding: bool = False  # assumed by the cache; a binder thread binds it


class SchedulingQueue:
    def __init__(
        self, lock: threading.RLock, clock: Callable[[], float] = time.time, retry_seconds: float = 30.0
    ) -> None:
        self.lock, self.clock = lock, clock
        self.retry_seconds = retry_seconds  # an unschedulable pod is tried again this long after it failed
        self.work = threading.Event()  # set when a session may have something to do
        self.pending: dict[PodKey, PendingPod] = {}
        self.generation = 0  # moves of every unschedulable pod so far

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self) -> Iterator[PendingPod]:
        return iter(self.pending.values())

    def get(self, key: PodKey) -> PendingPod | None:
        return self.pending.get(key)

    # -- pods arrive and leave -------------------------------------------------------------
    def add(self, task: TaskInfo) -> bool:
        """A pending pod's task from its latest event: a new pod is active (returns True); a known one
        keeps where it stands, with the new task."""
        with self.lock:
            entry = self.pending.get(task.key)
            if entry is not None:
                entry.task = task
                return False
            self.pending[task.key] = PendingPod(task)
            self.work.set()
            return True

    def remove(self, key: PodKey) -> PendingPod | None:
        """The pod is bound or gone: out of the queue (its entry, or None when it was not there)."""
        with self.lock:
            return self.pending.pop(key, None)

    # -- events that move pods -------------------------------------------------------------
    def move_all(self) -> None:
        """Something that could help changed: every unschedulable pod is active again, or backing off
        while its back-off lasts (kube-scheduler's MoveAllToActiveOrBackoffQueue)."""
        with self.lock:
            self.generation += 1
            self.work.set()

    def activate(self, key: PodKey) -> None:
        """The pod is tried in the next session whatever it failed at before (its placement went stale
        before it could be assumed)."""
        with self.lock:
            entry = self.pending.get(key)
            if entry is not None:
                entry.failed_generation = -1
            self.work.set()

    def assumed(self, key: PodKey) -> PendingPod:
        """The cache has booked the pod: it binds now (in no queue until that ends)."""
        with self.lock:
            entry = self.pending[key]
            entry.attempts += 1
            entry.binding = True
            return entry

    def back_off(self, key: PodKey) -> None:
        """Its bind failed: the pod backs off (longer with every bind tried), then is active."""
        with self.lock:
            entry = self.pending.get(key)
            if entry is not None:
                entry.binding = False
                entry.not_before = self.clock() + BIND_BACKOFF.delay(entry.attempts)
                entry.failed_generation = -1

    def failed(self, key: PodKey, now: float, error: bool) -> PendingPod | None:
        """A session could not place the pod: an `error` backs it off (longer with every error in a
        row), a misfit makes it unschedulable. Returns its entry (None when it left the queue)."""
        with self.lock:
            entry = self.pending.get(key)
            if entry is None:
                return None
            entry.failed_generation, entry.failed_at = self.generation, now
            if error:  # retried after a back-off, whatever changes
                entry.errors += 1
                entry.not_before = now + ERROR_BACKOFF.delay(entry.errors - 1)
                entry.failed_generation = -1
            else:
                entry.errors = 0
            return entry

    # -- where pods stand ------------------------------------------------------------------
    def eligible(self, entry: PendingPod, now: float) -> bool:
        """Whether a session should try the pod at `now` (it is active). Call under `lock`."""
        if now < entry.not_before or entry.binding:
            return False
        return entry.failed_generation != self.generation or now - entry.failed_at >= self.retry_seconds

    def state(self, key: PodKey) -> QueueState | None:
        """Where the pod stands now (None: not pending)."""
        with self.lock:
            entry = self.pending.get(key)
            if entry is None:
                return None
            now = self.clock()
            if entry.binding:
                return QueueState.BINDING
            if now < entry.not_before:
                return QueueState.BACKOFF
            return QueueState.ACTIVE if self.eligible(entry, now) else QueueState.UNSCHEDULABLE

    def has_work(self) -> bool:
        """Whether any pod is active."""
        with self.lock:
            now = self.clock()
            return any(self.eligible(e, now) for e in self.pending.values())
