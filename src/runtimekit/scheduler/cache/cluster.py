"""The live scheduler's cluster cache, fed by informer events, as kube-scheduler's `internal/cache`
keeps it: nodes and their GPU ledger, the pods that hold resources (bound by any scheduler, and
those this scheduler assumed while it binds them), jobs and PodGroups, Queues, the pods on nodes as
inter-pod affinity reads them (`PodBook`), namespaces' labels, PriorityClasses (a PodGroup's
priority, `priorities.py`), PodDisruptionBudgets, ResourceQuotas and the storage objects
(`volumes.VolumeStore`). A pending pod of this scheduler goes to the scheduling queue
(`runtimekit.scheduler.scheduling_queue`); a change that could help a waiting pod moves the queue's
unschedulable pods. `snapshot.py` copies what one session works on.

Booking rules (ARCHITECTURE §2, §4):
- a pod bound to a node holds its CPU, memory, scalar resources and, from its assignment annotation,
  its GPU shares until it is deleted or terminates; a restarted scheduler rebuilds exactly this. The
  assignment counts only when it is the scheduler's and equals the pod's requests (`authority.py`);
  any other is ignored (no GPU booked), with a Warning Event on the pod (`notices`) and a count;
- a pod this scheduler binds is booked at once (`assume`), before the API server answers; a failed
  bind gives the booking back (`forget`); the pod's own bound event confirms it;
- a booking that would over-commit (two pods claiming the same GPU share) is refused and reported,
  never double-booked.
Thread-safe under `lock`, shared with the scheduling queue: the informer threads, the scheduling
thread and the binder threads all use both, and a pod passes between them in one step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from runtimekit.kube.objects import (
    KubeObject,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    QueueStatus,
    ResourceClaim,
    ResourceQuota,
    meta,
    object_key,
)
from runtimekit.kube.semantics.podclaims import uses_claims
from runtimekit.model import (
    Ledger,
    LedgerError,
    NodeInventory,
    NodeName,
    Placement,
    PodKey,
    placement_from_assignment,
)
from runtimekit.model.ledger import IntArray
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.peers import foreign_names
from runtimekit.scheduler.cache.authority import EVENT_REASON, AssignmentAuthority, Seal
from runtimekit.scheduler.cache.claimbook import PREFIX as CLAIM_PREFIX
from runtimekit.scheduler.cache.claimbook import ClaimBook, ledger_backed
from runtimekit.scheduler.cache.dra import CLAIMS, SLICES, DraStore
from runtimekit.scheduler.cache.objects import (
    NodeState,
    is_deleting,
    is_terminated,
    job_key,
    node_state,
    queue_info,
    queue_of,
    rebound,
    task_from_pod,
)
from runtimekit.scheduler.cache.policy import disruption_budget, namespace_quota
from runtimekit.scheduler.cache.priorities import PriorityClasses
from runtimekit.scheduler.cache.queues import ALWAYS, queue_status
from runtimekit.scheduler.cache.volumes import VolumeStore
from runtimekit.scheduler.framework.info import (
    DEFAULT_QUEUE,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    TaskInfo,
    TaskStatus,
)
from runtimekit.scheduler.framework.policy import DisruptionBudget, NamespaceQuota
from runtimekit.scheduler.kubesem.draquota import QueueClaims, pod_demands, status_entries
from runtimekit.scheduler.kubesem.drarequest import KIT_CLASS, is_claim_container, with_claims
from runtimekit.scheduler.kubesem.podbook import PodBook
from runtimekit.scheduler.scheduling_queue import SchedulingQueue

log = logging.getLogger(__name__)
MAX_NOTICES = 1000
PEER_NAME_REASON = "UnsupportedName"  # the Event reason of a peer's name the protocol does not read


@dataclass
class JobState:
    key: JobKey
    namespace: str
    name: str
    group: PodGroup | None = None  # the PodGroup object, when there is one
    members: set[PodKey] = field(default_factory=set)
    grouped: bool = False  # its pods name a PodGroup (which may not have arrived yet)
    phase: str = ""
    reported: str = ""


class ClusterCache:
    def __init__(
        self,
        protocol: KitProtocol,
        scheduler_name: str | Collection[str],
        queue: SchedulingQueue,
        clock: Callable[[], float] = time.time,
        rank_seed: int = 0,
        signed: bool = False,
    ) -> None:
        self.protocol, self.queue, self.clock = protocol, queue, clock
        # the schedulerName values whose pods this cache takes (Volcano's --scheduler-name is repeatable)
        self.scheduler_names = frozenset([scheduler_name] if isinstance(scheduler_name, str) else scheduler_name)
        self.default_queue = DEFAULT_QUEUE  # the queue of a pod or PodGroup that names none
        self.lock = queue.lock  # one lock with the queue: a pod passes between the two in one step
        self.ledger = Ledger()
        self.nodes: dict[NodeName, NodeState] = {}
        self.meta_rows: list[NodeMeta | None] = []
        self.meta_version = 0
        # changes with every node event that reaches the table (a node set or removed): what a
        # snapshot reads of the nodes alone is kept until it does (`snapshot.node_facts_kept`)
        self.node_version = 0
        self.facts_kept: tuple[int, object] | None = None
        self.running: dict[PodKey, TaskInfo] = {}  # bound pods holding resources
        self.uid_of: dict[str, PodKey] = {}  # namespace/name -> key
        self.orphans: dict[PodKey, Pod] = {}  # bound pods whose node is not known yet
        self.jobs: dict[JobKey, JobState] = {}
        self.groups: dict[str, PodGroup] = {}  # namespace/name -> PodGroup
        self.queues: dict[str, QueueInfo] = {}
        self.queue_allocated: dict[str, Resources] = {}
        self.claim_pods: dict[str, set[PodKey]] = {}  # per queue, its bound pods that use ResourceClaims
        self.conflicts: dict[PodKey, str] = {}
        self.assumed: dict[PodKey, float] = {}  # pods this scheduler bound, not yet seen bound
        # which assignments count (`signed`: their signatures are checked before their events come here,
        # `signatures.py`, and each bound pod's arrives as a Seal; the cache never holds the key)
        self.authority = AssignmentAuthority(protocol, signed)
        self.seals: dict[PodKey, Seal] = {}  # the latest Seal of each bound pod's assignment
        self.unbooked: set[PodKey] = set()  # bound pods whose assignment was ignored: judged again at each event
        # Warnings (reason, message) written as Events by the binder outside the lock: peers' names a
        # new pending pod carries that the protocol does not read (runtimekit.protocol.peers), and
        # assignments ignored (`authority`).
        self.notices: list[tuple[TaskInfo, str, str]] = []
        # what inter-pod affinity, spread and host ports read of the pods booked on nodes, and
        # the labels of every namespace (kept in step with the ledger's bookings)
        self.pods = PodBook()
        self.priorities = PriorityClasses()  # a PodGroup's priorityClassName -> the job's priority
        self.budgets: dict[str, DisruptionBudget] = {}  # namespace/name -> PodDisruptionBudget
        self.quotas: dict[str, NamespaceQuota] = {}  # namespace/name -> ResourceQuota
        self.volumes = VolumeStore()  # claims, volumes, classes, CSINodes (when a plugin reads them)
        self.dra = DraStore()  # ResourceClaims, DeviceClasses, ResourceSlices (when a plugin reads them)
        self.claims = ClaimBook(self.ledger)  # allocated claims' GPUs, booked in the ledger
        # assumed pods whose placement holds the GPUs of their claims (a request derived from claims,
        # `kubesem/drarequest.py`) until the claims' allocations are booked in their stead
        self.claim_slotted: set[PodKey] = set()
        self.inventory_version = 0  # changes when a node's GPUs do (`kit_backed` is worked out again)
        self._backed: tuple[object, int, bool] | None = None
        self.rank_seed = rank_seed  # the tie-break order of nodes, a permutation drawn from it
        self.rank_cache: tuple[int, IntArray] | None = None

    # -- nodes -----------------------------------------------------------------------------
    def on_node(self, kind: str, obj: Node) -> None:
        name = NodeName(str(meta(obj).get("name", "")))
        with self.lock:
            if kind == "DELETED":
                self._remove_node(name)
            else:
                self._set_node(node_state(obj, self.protocol))
            self.queue.move_all()

    def _set_node(self, state: NodeState) -> None:
        if state.problem:
            log.warning("node %s: %s", state.meta.name, state.problem)
        previous = self.nodes.get(state.meta.name)
        new = previous is None
        self.node_version += 1
        if previous is None or previous.inventory != state.inventory:
            self.inventory_version += 1
        dropped = self.ledger.set_node(state.inventory, state.capacity)
        if new and self.claims.pending:
            self.claims.retry(self.dra.pools())
        for pod, reason in dropped:
            self.pods.remove(pod)
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
        self.node_version += 1
        row = self.ledger.table.row(name)
        for pod in self.ledger.remove_node(name):
            if pod.startswith(CLAIM_PREFIX):  # booked again should the node come back
                self.claims.node_gone(pod, self.dra.claim)
                continue
            self.pods.remove(pod)
            task = self.running.pop(pod, None)
            if task is not None and task.pod is not None:
                self.orphans[pod] = task.pod  # the manifest it was read from
                self._account(task, -1)
        self.meta_rows[row] = None
        self.meta_version += 1
        self.inventory_version += 1
        del self.nodes[name]

    def inventory(self, name: NodeName) -> NodeInventory | None:
        """A node's GPUs as last seen (None: the node is gone). Without the lock: one read of the
        nodes' dict, whose entries are replaced whole, is atomic; a binder thread (once a pod) must
        not wait for a session holding the lock, as each wait hands the GIL over."""
        state = self.nodes.get(name)
        return state.inventory if state is not None else None

    # -- pods ------------------------------------------------------------------------------
    def on_pod(self, kind: str, obj: Pod, seal: Seal | None = None) -> None:
        """A bound pod is booked; a pending pod of this scheduler goes to the queue; a pod that
        leaves gives back what it held. `seal`: the check of a bound pod's assignment signature
        (`LiveCache.on_pod` makes it)."""
        with self.lock:
            self._on_pod(kind, obj, seal)

    def _on_pod(self, kind: str, obj: Pod, seal: Seal | None) -> None:
        name_key = object_key(obj)
        uid = PodKey(str(meta(obj).get("uid") or self.uid_of.get(name_key) or name_key))
        if kind == "DELETED" or is_terminated(obj):
            self._forget_pod(uid, name_key)
            return
        self.uid_of[name_key] = uid
        spec = obj.get("spec") or {}
        if spec.get("nodeName"):
            if seal is None:
                self.seals.pop(uid, None)
            else:
                self.seals[uid] = seal
            waiting = self.queue.remove(uid)
            self._book_bound(obj, waiting.task if waiting is not None else self.running.get(uid))
            return
        if spec.get("schedulerName", "default-scheduler") not in self.scheduler_names or is_deleting(obj):
            return
        if uid in self.assumed:  # our bind is in flight; the event is older than it
            return
        entry = self.queue.get(uid)
        task = task_from_pod(obj, self.protocol, entry.task if entry is not None else None)
        if not self.queue.add(task):
            if spec.get("resourceClaims"):  # the template controller named its claims: try it again now
                self.queue.activate(uid)
            return
        self._join(task, obj)
        offered = self.ledger.table.scalar_free.keys()
        for found in foreign_names(obj, self.protocol, offered):
            self._notice(task, PEER_NAME_REASON, found.message())

    def _notice(self, task: TaskInfo, reason: str, message: str) -> None:
        self.notices.append((task, reason, message))
        del self.notices[:-MAX_NOTICES]  # a scheduler that does not lead writes none: keep the newest

    def _join(self, task: TaskInfo, pod: Pod) -> None:
        key, grouped = job_key(pod)
        job = self.jobs.get(key)
        if job is None:
            group_name = key.split("/", 1)[1] if grouped else task.name
            job = self.jobs[key] = JobState(key, task.namespace, group_name)
        if grouped:
            job.grouped = True
            job.group = self.groups.get(key)
        job.members.add(task.key)

    def _book_bound(self, pod: Pod, like: TaskInfo | None = None) -> None:
        node = NodeName(str((pod.get("spec") or {}).get("nodeName")))
        if like is not None and self._confirmed(pod, node, like):
            return
        task = task_from_pod(pod, self.protocol, like)
        held = self.ledger.booking(task.key)
        # assumed here, or booked before: confirmed (an ignored assignment is judged again: a key may
        # have come, the pod may have been admitted)
        if held is not None and held.node == node and task.key not in self.unbooked:
            self.assumed.pop(task.key, None)
            previous = self.running.get(task.key)
            task.placement, task.node = held, node
            task.status = TaskStatus.RELEASING if is_deleting(pod) else TaskStatus.RUNNING
            if previous is not None:
                self._account(previous, -1)
            self._claims_counted(task, pod)
            self.running[task.key] = task
            self._account(task, +1)
            self.pods.add_pod(task.key, pod, task.namespace, node)
            self._join(task, pod)
            return
        if held is not None:
            self._release(task.key)
        state = self.nodes.get(node)
        if state is None:
            self.orphans[task.key] = pod
            return
        verdict, new = self.authority.judge(pod, task.key, task.request, state, self.seals.get(task.key))
        if new:
            log.warning("pod %s on %s: assignment ignored: %s", object_key(pod), node, verdict.message)
            self._notice(task, EVENT_REASON, verdict.event_message(node))
            self.queue.work.set()  # the scheduling thread writes notices
        try:
            if verdict.assignment is not None:
                placement = placement_from_assignment(
                    verdict.assignment, state.inventory, task.request.cpu_milli, task.request.memory_bytes
                )
            else:
                if task.request.uses_gpu and not verdict.reason:
                    log.warning(
                        "pod %s on %s asks for GPUs but has no assignment of ours; booking CPU and memory only",
                        object_key(pod),
                        node,
                    )
                placement = Placement(node, task.request.cpu_milli, task.request.memory_bytes)
            if task.request.scalars:  # extended resources, storage and huge pages are held too
                placement = replace(placement, scalars=task.request.scalars)
            self.ledger.reserve(task.key, placement, allow_unusable=True)
        except LedgerError as exc:
            self.conflicts[task.key] = str(exc)
            log.error("pod %s on %s cannot be booked: %s", object_key(pod), node, exc)
            return
        self.conflicts.pop(task.key, None)
        if verdict.reason:
            self.unbooked.add(task.key)
        else:
            self.unbooked.discard(task.key)
        task.placement, task.node = placement, node
        task.status = TaskStatus.RELEASING if is_deleting(pod) else TaskStatus.RUNNING
        self._claims_counted(task, pod)
        self.running[task.key] = task
        self._account(task, +1)
        self.pods.add_pod(task.key, pod, task.namespace, node)
        self._join(task, pod)

    def _confirmed(self, pod: Pod, node: NodeName, like: TaskInfo) -> bool:
        """`_book_bound`'s common case in fewer steps, to the same state: the event of a pod this
        cache holds as bound (`like`: the binder's task, or its last event's), on the node it is
        booked on, that is only its binding (`objects.rebound`: no field of the task changes, so
        neither what its queue holds nor its job). False, having changed nothing, for any other."""
        key = like.key
        held = self.ledger.booking(key)
        if held is None or held.node != node or key in self.unbooked or self.running.get(key) is not like:
            return False
        job = self.jobs.get(like.job)
        if job is None or key not in job.members or is_deleting(pod) or uses_claims(pod):
            return False  # joined anew, released, or its claims counted in its request: the slow path
        task = rebound(pod, self.protocol, like)
        if task is None:
            return False
        self.assumed.pop(key, None)
        task.placement, task.node, task.status = held, node, TaskStatus.RUNNING
        self.running[key] = task  # the same resources in the same queue: the queue's sum stands
        self.pods.add_pod(key, pod, task.namespace, node)
        return True

    def kit_backed(self) -> bool:
        """Whether the kit driver's GPUs are all GPUs of the ledger (`claimbook.ledger_backed`), worked
        out again when a slice or a node's GPUs changed (call under the lock)."""
        pools = self.dra.pools()
        if self._backed is None or self._backed[0] is not pools or self._backed[1] != self.inventory_version:
            self._backed = (pools, self.inventory_version, ledger_backed(pools, self.ledger.table, KIT_CLASS))
        return self._backed[2]

    def _claims_counted(self, task: TaskInfo, pod: Pod) -> None:
        """A bound pod's claims of the kit's GPUs count in its queue as its request (the GPUs are booked
        under the claims, `claimbook.py`)."""
        if uses_claims(pod) and self.kit_backed():
            whole = self.protocol.rules.memory_default == "whole"
            task.request = with_claims(task.request, pod, self.dra.claims(), whole, allocated_too=True)

    def _account(self, task: TaskInfo, sign: int) -> None:
        job = self.jobs.get(task.job)
        queue = queue_of(task.pod or {}, job.group if job else None, self.default_queue)
        current = self.queue_allocated.get(queue, Resources())
        delta = task.resources
        now = self.queue_allocated[queue] = current + delta if sign > 0 else current - delta
        if sign < 0 and now.is_empty and queue not in self.queues and queue not in (*ALWAYS, self.default_queue):
            del self.queue_allocated[queue]  # a deleted queue's last pod left
        if uses_claims(task.pod):  # the DRA devices its queue holds (Volcano's capacity DRA quotas)
            users = self.claim_pods.setdefault(queue, set())
            if sign > 0:
                users.add(task.key)
            else:
                users.discard(task.key)
                if not users:
                    del self.claim_pods[queue]

    def _release(self, uid: PodKey) -> None:
        task = self.running.pop(uid, None)
        if task is not None:
            self._account(task, -1)
        self.ledger.release(uid)
        self.pods.remove(uid)

    def _forget_pod(self, uid: PodKey, name_key: str) -> None:
        self.uid_of.pop(name_key, None)
        self.orphans.pop(uid, None)
        self.conflicts.pop(uid, None)
        self.unbooked.discard(uid)
        self.seals.pop(uid, None)
        self.claim_slotted.discard(uid)
        self.authority.forget(uid)
        if self.ledger.booking(uid) is not None or uid in self.running:
            self._release(uid)
            self.assumed.pop(uid, None)
            self.queue.move_all()
        self.queue.remove(uid)
        for job in self.jobs.values():
            if uid in job.members:
                job.members.discard(uid)
                if not job.members and job.group is None:
                    self.jobs.pop(job.key, None)
                break

    # -- assumed pods (kube-scheduler's AssumePod, ForgetPod, FinishBinding) -----------------
    def assume(self, task: TaskInfo) -> TaskInfo | None:
        """Book a session's placement of a pending pod before it is bound: the pod's task as it will
        be bound (node and placement set), or None when it cannot be (the pod was deleted or bound
        meanwhile, its bind is in flight, or its placement no longer fits: it is tried again)."""
        assert task.placement is not None
        assert task.node is not None
        with self.lock:
            entry = self.queue.get(task.key)
            if entry is None or task.key in self.assumed:  # deleted, bound meanwhile, or a bind in flight
                return None
            try:
                self.ledger.reserve(task.key, task.placement)
            except LedgerError as exc:
                # the cluster changed since the snapshot: try again in the next session
                log.info("pod %s/%s: %s; retrying", task.namespace, task.name, exc)
                self.queue.activate(task.key)
                return None
            self.assumed[task.key] = self.clock()
            if any(is_claim_container(c.container) for c in task.request.gpus):
                self.claim_slotted.add(task.key)
            self.pods.add_pod(task.key, entry.task.pod, entry.task.namespace, task.node)
            self.queue.assumed(task.key)
            bound = entry.task.clone()
            bound.node, bound.placement = task.node, task.placement
            if task.key in self.claim_slotted:
                bound.request = task.request  # its claims' GPUs count in its queue while it binds
            return bound

    def forget(self, key: PodKey) -> None:
        """Its bind failed: an assumed pod's booking goes back (unless its bound event came first)."""
        with self.lock:
            self.assumed.pop(key, None)
            self.claim_slotted.discard(key)
            if self.ledger.booking(key) is not None and key not in self.running:
                self.ledger.release(key)
                self.pods.remove(key)

    def finish_binding(self, task: TaskInfo) -> None:
        """Its bind succeeded: the pod leaves the queue and holds its booking as bound, until its own
        bound event confirms it (which may have come first)."""
        with self.lock:
            self.queue.remove(task.key)
            if task.key not in self.running:
                task.status = TaskStatus.BOUND
                self.running[task.key] = task
                self._account(task, +1)

    # -- groups, namespaces, queues and policy objects -------------------------------------
    def on_podgroup(self, kind: str, obj: PodGroup) -> None:
        key = object_key(obj)
        with self.lock:
            if kind == "DELETED":
                self.groups.pop(key, None)
                job = self.jobs.get(JobKey(key))
                if job is not None:
                    self._regroup(job, None)
                    if not job.members:  # nothing left of the job: it goes (and its metric series with it)
                        del self.jobs[job.key]
            else:
                self.groups[key] = obj.copy()
                job = self.jobs.get(JobKey(key))
                if job is None:
                    namespace, _, name = key.partition("/")
                    job = self.jobs[JobKey(key)] = JobState(JobKey(key), namespace, name)
                self._regroup(job, obj.copy())
                job.phase = str((obj.get("status") or {}).get("phase") or "")
            self.queue.move_all()

    def _regroup(self, job: JobState, group: PodGroup | None) -> None:
        """Give a job its PodGroup (None: deleted) and move what its running pods hold to the queue
        that now has them: pods listed before their PodGroup, as on a cold start, were charged to
        their own annotation's queue or the default one, and a PodGroup may change queue."""
        held = [task for key in job.members if (task := self.running.get(key)) is not None]
        moved = [
            task
            for task in held
            if queue_of(task.pod or {}, job.group, self.default_queue)
            != queue_of(task.pod or {}, group, self.default_queue)
        ]
        for task in moved:
            self._account(task, -1)
        job.group = group
        for task in moved:
            self._account(task, +1)

    def on_namespace(self, kind: str, obj: Namespace) -> None:
        """Namespace labels, for inter-pod affinity terms with a namespaceSelector."""
        name = str(meta(obj).get("name", ""))
        labels = meta(obj).get("labels") or {}
        with self.lock:
            if kind == "DELETED":
                self.pods.set_namespace(name, None)
            else:
                self.pods.set_namespace(name, {str(k): str(v) for k, v in labels.items()})
            self.queue.move_all()

    def on_queue(self, kind: str, obj: Queue) -> None:
        name = str(meta(obj).get("name", ""))
        with self.lock:
            if kind == "DELETED":
                self.queues.pop(name, None)
                if name not in (*ALWAYS, self.default_queue) and self.queue_allocated.get(name, Resources()).is_empty:
                    self.queue_allocated.pop(name, None)
            else:
                self.queues[name] = queue_info(obj, self.protocol)
            self.queue.move_all()

    def on_priority_class(self, kind: str, obj: PriorityClass) -> None:
        """A PriorityClass event: the priority of the jobs whose PodGroup names it (or of all, for the
        global default) changes with the next session's snapshot."""
        with self.lock:
            self.priorities.apply(kind, obj)

    def on_budget(self, kind: str, obj: PodDisruptionBudget) -> None:
        """A PodDisruptionBudget event (informer on policy/v1, when the `pdb` plugin is configured)."""
        with self.lock:
            if kind == "DELETED":
                self.budgets.pop(object_key(obj), None)
            else:
                self.budgets[object_key(obj)] = disruption_budget(obj)

    def on_quota(self, kind: str, obj: ResourceQuota) -> None:
        """A ResourceQuota event (informer on v1, when the `resourcequota` plugin is configured)."""
        with self.lock:
            if kind == "DELETED":
                self.quotas.pop(object_key(obj), None)
            else:
                self.quotas[object_key(obj)] = namespace_quota(obj)
            self.queue.move_all()  # a raised quota may admit a waiting pod group

    def on_volumes(self, resource: str) -> Callable[[str, KubeObject], None]:
        """The handler of one storage resource's informer (`volumes.PATHS`): a change may let a
        waiting pod fit (a claim bound, a volume or class added), as in kube-scheduler's
        VolumeBinding events."""

        def handle(kind: str, obj: KubeObject) -> None:
            with self.lock:
                self.volumes.apply(resource, kind, obj)
                self.queue.move_all()

        return handle

    def on_dra(self, resource: str) -> Callable[[str, KubeObject], None]:
        """The handler of one DRA resource's informer (`dra.PATHS`): a claim made or freed, a class
        or a slice added may let a waiting pod fit, as in kube-scheduler's DynamicResources events."""

        def handle(kind: str, obj: KubeObject) -> None:
            with self.lock:
                self.dra.apply(resource, kind, obj)
                if resource == CLAIMS:
                    self._claim_changed(kind, cast("ResourceClaim", obj))
                elif resource == SLICES and self.claims.pending:
                    self.claims.retry(self.dra.pools())
                self.queue.move_all()

        return handle

    def _claim_changed(self, kind: str, claim: ResourceClaim) -> None:
        """Book the claim's GPUs in the ledger (or give them back). A pod placed with its claims' GPUs
        in its own placement gives them up first, so they are never booked twice."""
        status = claim.get("status") or {}
        if kind != "DELETED" and status.get("allocation") is not None and self.claim_slotted:
            for consumer in status.get("reservedFor") or []:
                uid = PodKey(consumer.get("uid", ""))
                held = self.ledger.booking(uid)
                if uid in self.claim_slotted and held is not None:
                    self.claim_slotted.discard(uid)
                    bare = replace(held, slots=())
                    self.ledger.release(uid)
                    self.ledger.reserve(uid, bare, allow_unusable=True)
                    if uid in self.running:
                        self.running[uid].placement = bare
        self.claims.apply(kind, claim, self.dra.pools())

    def node_labels(self, node: NodeName) -> Mapping[str, str] | None:
        """A node's labels as last seen (None: the node is gone)."""
        with self.lock:
            state = self.nodes.get(node)
            return state.meta.labels if state is not None else None

    def pod_known(self, key: PodKey) -> bool:
        """Whether the pod is still pending, binding or bound (not deleted)."""
        with self.lock:
            return key in self.queue.pending or key in self.running

    # -- what sessions and status writes read ----------------------------------------------
    def take_notices(self) -> list[tuple[TaskInfo, str, str]]:
        """The warnings not written yet, as (task, Event reason, message): a peer's names (each pod's
        once, when it was first seen) and ignored assignments (once per pod and annotation text)."""
        with self.lock:
            notices, self.notices = self.notices, []
            return notices

    def job_phases(self, default_queue: str) -> dict[str, list[str]]:
        """Per known queue, the phase of each of its jobs, as Volcano's queue controller counts
        them (call under the lock). One pass over every job, about once a second: kept tight."""
        phases: dict[str, list[str]] = {name: [] for name in self.queues}
        running, pending = self.running, self.queue.pending
        for job in self.jobs.values():
            first: TaskInfo | None = None
            placed = False
            for m in job.members:
                task = running.get(m)
                if task is not None:
                    placed = True
                else:
                    entry = pending.get(m)
                    task = entry.task if entry is not None else None
                if first is None:
                    first = task
            if job.group is None and first is None:
                continue
            queue = queue_of(first.pod or {} if first is not None else {}, job.group, default_queue)
            if queue not in phases:
                continue
            if job.group is not None:
                phase = job.phase or str((job.group.get("status") or {}).get("phase") or "Pending")
            else:  # a pod of its own: admitted at once (Volcano gives it a pod group of one)
                phase = "Running" if placed else "Inqueue"
            phases[queue].append(phase)
        return phases

    def queue_statuses(self) -> dict[str, QueueStatus]:
        """Each Queue object's status as Volcano's queue controller reports it; a queue whose spec names
        DRA quota keys also gets the DRA devices its bound pods' claims hold (`deviceclass/<class>`,
        each claim once), where the claims are watched."""
        with self.lock:
            phases = self.job_phases(self.default_queue)
            out = {}
            for name, q in self.queues.items():
                status = queue_status(q.state, phases[name], self.queue_allocated.get(name, Resources()), self.protocol)
                users = self.claim_pods.get(name) if q.has_dra else None
                if users:
                    held = QueueClaims()
                    claims = self.dra.claims()
                    for key in sorted(users):
                        task = self.running.get(key)
                        if task is not None and task.pod is not None:
                            held.add(pod_demands(task.pod, claims))
                    status["allocated"] = {**status.get("allocated", {}), **status_entries(held.allocated)}
                out[name] = status
            return out

    # -- introspection ---------------------------------------------------------------------
    def booked(self) -> dict[PodKey, Placement]:
        with self.lock:
            return dict(self.ledger.bookings())

    def recompute(self) -> Ledger:
        """A ledger rebuilt from the node and pod objects as last seen (for checks and tests)."""
        with self.lock:
            pods = [(k, t.placement) for k, t in self.running.items() if t.placement is not None]
            pods += [
                (k, p) for k, p in self.ledger.bookings().items() if k in self.assumed or k.startswith(CLAIM_PREFIX)
            ]
            ledger, _ = Ledger.rebuild(((s.inventory, s.capacity) for s in self.nodes.values()), pods)
            return ledger
