"""The live scheduler's side of a session: the framework's `Cache` answered by the three parts the
live side is cut into, as kube-scheduler cuts it:

- the scheduling queue (`runtimekit.scheduler.scheduling_queue`): the pending pods of this
  scheduler, active, backing off or unschedulable;
- the cluster cache (`cluster.py`, fed by informers; `snapshot.py` copies it for a session): nodes
  and the ledger, bound and assumed pods, jobs and PodGroups, Queues, the pods on nodes, policy
  objects;
- the binder (`runtimekit.scheduler.binder`): binds on binder threads, evictions, status writes.

`snapshot` is the cluster cache's copy (and tells the pods of a missing PodGroup, and those that
carry a peer's names, why); `bind` assumes the placement in the cache and hands the pod to the
binder; `evict` is the binder's; `job_updated` (at session close) tells the queue which pods failed
and how (an error backs off, a misfit waits for a change) and writes why they wait and their
PodGroup's status.

Locks: the queue and the cluster cache share one (`RLock`), since informer threads, the scheduling
thread and binder threads move pods between them in single steps; the binder keeps its own for its
threads and per-node queues and never nests the two. `live_cache` wires the parts as the scheduler
server runs them (`runtimekit.scheduler.server`); tests use it too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from runtimekit.base.keyring import KeyRing
from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.objects import Condition, Pod, PodGroupStatus
from runtimekit.model.authority import Signer
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.binder import Binder, BinderPool
from runtimekit.scheduler.cache.cluster import ClusterCache, JobState
from runtimekit.scheduler.cache.signatures import SignatureCheck
from runtimekit.scheduler.cache.snapshot import awaits_enqueue, take_snapshot
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks
from runtimekit.scheduler.framework.info import JobInfo, Snapshot, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.framework.status import Code, FitErrors
from runtimekit.scheduler.scheduling_queue import SchedulingQueue


class LiveCache:
    def __init__(
        self,
        queue: SchedulingQueue,
        cache: ClusterCache,
        binder: BinderPool,
        signatures: SignatureCheck | None = None,
    ) -> None:
        self.queue, self.cache, self.binder = queue, cache, binder
        self.signatures = signatures  # held here, beside the binder's signer, never by the cluster cache
        self.include_running = False  # preempt/reclaim need every running task in the snapshot
        self.include_claim_users = False  # capacity's DRA quotas need each queue's pods that use claims

    def on_pod(self, kind: str, obj: Pod) -> None:
        """The pods informer's handler: the cluster cache's, with each bound pod's assignment
        signature checked first (`signatures.py`)."""
        seal = self.signatures.seal(kind, obj) if self.signatures is not None else None
        self.cache.on_pod(kind, obj, seal)

    def snapshot(self) -> Snapshot:
        snapshot, missing_groups = take_snapshot(self.cache, self.include_running, self.include_claim_users)
        for task, message in missing_groups:
            self.binder.report(task, False, "FailedScheduling", message)
        self.write_notices()
        return snapshot

    def has_work(self, enqueue: bool) -> bool:
        """Whether a session has something to do: a pod to try or, when the conf has the enqueue
        action, a PodGroup with no pod yet waiting to be admitted (a vcjob's pods are created only
        once its PodGroup is Inqueue). One pass over the jobs when no pod waits."""
        if self.queue.has_work():
            return True
        with self.cache.lock:
            return enqueue and any(awaits_enqueue(job) for job in self.cache.jobs.values())

    def write_notices(self) -> None:
        """The cache's warnings not written yet, as Events (each session, and by the scheduling
        thread while it leads: an ignored assignment is reported with no pod pending)."""
        self.binder.warn(self.cache.take_notices())

    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks, group: BindGroup | None = None) -> None:
        bound = self.cache.assume(task)
        if bound is None:
            hooks.unreserve(task)
            if group is not None:  # the gang's other members are given back too
                self.binder.abandon(task, group)
            return
        self.binder.submit(bound, choice, hooks, group)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.binder.evict(task, reason)

    def job_updated(self, job: JobInfo) -> None:
        now = self.queue.clock()
        reports: list[tuple[TaskInfo, str]] = []
        group_status: PodGroupStatus | None = None
        with self.cache.lock:
            for key, errors in job.fit_errors.items():
                failed = errors.status if isinstance(errors, FitErrors) else None
                entry = self.queue.failed(key, now, failed is not None and failed.code is Code.ERROR)
                if entry is None:
                    continue
                message = errors.message if isinstance(errors, FitErrors) else str(errors)
                if message != entry.reported:
                    entry.reported = message
                    reports.append((entry.task, message))
            state = self.cache.jobs.get(job.key)
            if state is not None and state.group is not None:
                group_status = _group_status(state, job, now)
        for task, message in reports:
            self.binder.report(task, False, "FailedScheduling", message)
        if group_status is not None and job.has_podgroup:
            self.binder.update_group(job.namespace, job.name, group_status)

    def session_failed(self, exc: Exception) -> None:
        """A session failed as a whole (a bug, or broken infrastructure) and placed nothing: each pod
        it was to try backs off as after an error and says why, rather than being tried again at
        once, without a word, in a loop."""
        now = self.queue.clock()
        message = f"scheduling session failed: {type(exc).__name__}: {exc}"[:1024]
        reports: list[TaskInfo] = []
        with self.cache.lock:
            for entry in list(self.queue):
                if not self.queue.eligible(entry, now):
                    continue
                failed = self.queue.failed(entry.task.key, now, True)
                if failed is not None and failed.reported != message:
                    failed.reported = message
                    reports.append(failed.task)
        for task in reports:
            self.binder.report(task, False, "FailedScheduling", message)

    def sync_queues(self) -> int:
        """Write the Queue statuses that changed since last written; returns how many were written."""
        return self.binder.sync_queues(self.cache.queue_statuses())


def _group_status(state: JobState, job: JobInfo, now: float) -> PodGroupStatus | None:
    """A PodGroup's status after a session (phase, ready pods, why its gang is unschedulable); None
    when it is what was last written. Call under the cache's lock (it records what it returns)."""
    phase = job.phase
    ready = sum(1 for t in job.tasks.values() if t.status in (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING))
    if ready >= job.min_member:
        phase = "Running"
    unschedulable = next(iter(job.fit_errors.values()), None)
    summary = f"{phase}:{ready}:{bool(unschedulable)}"
    if summary == state.reported:
        return None
    state.reported, state.phase = summary, phase
    conditions: list[Condition] = []
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
    return {"phase": phase, "running": ready, "conditions": conditions}


def live_cache(
    protocol: KitProtocol,
    scheduler_name: str | Collection[str],
    binder: Binder,
    clock: Callable[[], float] = time.time,
    retry_seconds: float = 30.0,
    bind_workers: int = 8,
    rank_seed: int = 0,
    signer: Signer | None = None,
    keys: KeyRing | None = None,
) -> LiveCache:
    """The live side wired: a queue and a cluster cache sharing one lock, and a binder over them that
    writes through `binder`. `keys` checks the signatures of bound pods' assignments (None: only
    their requests are checked); pod events must then come through `LiveCache.on_pod`."""
    queue = SchedulingQueue(threading.RLock(), clock, retry_seconds)
    cache = ClusterCache(protocol, scheduler_name, queue, clock, rank_seed, signed=keys is not None)
    signatures = SignatureCheck(protocol, keys) if keys is not None else None
    pool = BinderPool(binder, cache, queue, bind_workers, signer)
    if signatures is not None and signer is keys:  # what the ring signs, it need not check again
        pool.vouch = signatures.vouch
    return LiveCache(queue, cache, pool, signatures)
