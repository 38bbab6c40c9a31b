"""A session's copy of the live cluster cache (kube-scheduler's per-cycle snapshot update): the node
table, node metadata, the jobs with a pod to try (their pending pods as the scheduling queue holds
them, those binding with the booking they hold, their bound pods), gangs left partly bound (even
while their waiting members back off), the PodGroups waiting, with no pod yet, to be enqueued, Queues
and what each holds (bound and binding pods), the pods on nodes,
PodDisruptionBudgets, ResourceQuotas and the storage objects. Called by the live cache at the start of each session,
under the cluster cache's lock. `node_facts` and `node_rank` are what a snapshot reads of the nodes
alone, public for the extender (`scheduler/extender/snapshot.py`), which keeps them between calls.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from runtimekit.kube.objects import Pod
from runtimekit.kube.semantics.podclaims import uses_claims
from runtimekit.model.ledger import IntArray
from runtimekit.model.scalars import combine
from runtimekit.scheduler.cache.cluster import ClusterCache, JobState
from runtimekit.scheduler.cache.objects import queue_of, resources_of
from runtimekit.scheduler.cache.policy import add_usage, quota_request, waiting_time
from runtimekit.scheduler.cache.queues import ALWAYS
from runtimekit.scheduler.framework.info import (
    JobInfo,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    Snapshot,
    TaskInfo,
    TaskStatus,
)
from runtimekit.scheduler.framework.policy import NamespaceQuota
from runtimekit.scheduler.kubesem.drarequest import with_claims
from runtimekit.scheduler.scheduling_queue import PendingPod


def take_snapshot(
    cache: ClusterCache, include_running: bool, include_claim_users: bool = False
) -> tuple[Snapshot, list[tuple[TaskInfo, str]]]:
    """The session's copy: jobs with an active pod (with `include_running`, every job with pods; a
    gang whose PodGroup has not arrived, none), with `include_claim_users` each queue's pods that use
    claims, and the pods to tell, once, that their PodGroup does not exist yet."""
    with cache.lock:
        missing_groups: list[tuple[TaskInfo, str]] = []
        return _snapshot(cache, include_running, missing_groups, include_claim_users), missing_groups


def _snapshot(
    cache: ClusterCache,
    include_running: bool,
    missing_groups: list[tuple[TaskInfo, str]],
    include_claim_users: bool = False,
) -> Snapshot:
    queue = cache.queue
    now = cache.clock()
    table = cache.ledger.table.copy()
    jobs: dict[JobKey, JobInfo] = {}
    pending, running = queue.pending, cache.running
    for job in cache.jobs.values():
        waiting = [e for m in job.members if (e := pending.get(m)) is not None and not e.binding]
        if job.grouped and job.group is None:  # a gang's pods before its PodGroup: wait for it
            message = f"PodGroup {job.key} does not exist (yet); its pods wait for it"
            for entry in waiting:
                if entry.reported != message:
                    entry.reported = message
                    missing_groups.append((entry.task, message))
            continue
        if (
            not any(queue.eligible(e, now) for e in waiting)
            and not (include_running and job.members)
            and not awaits_enqueue(job)
            and not admitted_without_pods(job)
            and not partly_held(job, waiting, cache)
        ):
            continue
        info = _job_info(cache, job)
        for entry in waiting:
            info.add(_with_claims(cache, entry.task.clone()))
        for member in job.members:
            if member in running:
                info.add(running[member].clone())
            elif member in pending and pending[member].binding:  # bound by us, not yet confirmed
                held = cache.ledger.booking(member)
                inflight = _with_claims(cache, pending[member].task.clone(), allocated_too=True)
                inflight.status = TaskStatus.BINDING
                inflight.placement, inflight.node = held, held.node if held else None
                info.add(inflight)
        jobs[job.key] = info
    queues = {name: q.clone() for name, q in cache.queues.items()}
    for name in (cache.default_queue, *ALWAYS):  # Volcano always has them: a pod never waits for them
        queues.setdefault(name, QueueInfo(name))
    facts = node_facts_kept(cache)
    return Snapshot(
        table,
        facts.metas,
        jobs,
        queues,
        node_rank(cache),
        facts.model_ids,
        facts.model_names,
        now,
        cache.meta_version,
        facts.capacity,
        queue_allocated(cache),
        cache.pods.frozen(),
        budgets=tuple(cache.budgets.values()),
        quotas=_quotas(cache),
        pod_facts=cache.pods.facts,
        volumes=cache.volumes.frozen(),
        dra=cache.dra.frozen(),
        claim_users=claim_users(cache) if include_claim_users else None,
    )


def claim_users(cache: ClusterCache) -> dict[str, tuple[Pod, ...]]:
    """Per queue, the manifests of its bound pods and of the pods this scheduler is binding that use
    ResourceClaims (what its DRA quota holds). Call under the cluster cache's lock."""
    out: dict[str, list[Pod]] = {}
    for queue, keys in cache.claim_pods.items():
        out[queue] = [t.pod for k in sorted(keys) if (t := cache.running.get(k)) is not None and t.pod is not None]
    pending, running = cache.queue.pending, cache.running
    for key in cache.assumed:
        entry = pending.get(key)
        if entry is None or not entry.binding or key in running or not uses_claims(entry.task.pod):
            continue
        job = cache.jobs.get(entry.task.job)
        queue = queue_of(entry.task.pod, job.group if job is not None else None, cache.default_queue)
        out.setdefault(queue, []).append(entry.task.pod)
    return {queue: tuple(pods) for queue, pods in out.items() if pods}


def queue_allocated(cache: ClusterCache) -> dict[str, Resources]:
    """What each queue holds: its bound pods (the sum the cache keeps) and the pods this scheduler is
    binding (assumed, their bind not finished), as Volcano's proportion and capacity count a job's
    Allocated and Binding tasks. Without the binding ones, a session that ran while binds were in
    flight saw their queue's room as free again and let it past its capability (onto room another
    queue was to get). Call under the cluster cache's lock."""
    allocated = dict(cache.queue_allocated)
    pending, running = cache.queue.pending, cache.running
    for key in cache.assumed:
        entry = pending.get(key)
        if entry is None or not entry.binding or key in running:
            continue
        task = entry.task
        if uses_claims(task.pod):  # its claims' GPUs count as they do once it is bound
            task = _with_claims(cache, task.clone(), allocated_too=True)
        job = cache.jobs.get(task.job)
        queue = queue_of(task.pod or {}, job.group if job is not None else None, cache.default_queue)
        allocated[queue] = allocated.get(queue, Resources()) + task.resources
    return allocated


def partly_held(job: JobState, waiting: Sequence[PendingPod], cache: ClusterCache) -> bool:
    """A gang that holds some members bound (or binding) but fewer than its minMember, with members
    waiting: it is in every session even while those wait out a back-off or are unschedulable, so
    that the gang plugin's order (a partly placed gang first) keeps the room it needs. Left out, a
    competitor took the GPU a member's failed bind gave back, and the gang stayed short of its
    minMember for good (a scheduler restart mid-gang, then one transient bind failure). Volcano has
    no per-pod back-off: a failed bind's task is pending again in the next session. Call under the
    cluster cache's lock."""
    group = job.group
    if group is None or not waiting or len(waiting) == len(job.members):
        return False
    pending, running = cache.queue.pending, cache.running
    held = sum(1 for m in job.members if m in running or ((e := pending.get(m)) is not None and e.binding))
    min_member = (group.get("spec") or {}).get("minMember", 1)
    return 0 < held < min_member


def awaits_enqueue(job: JobState) -> bool:
    """A PodGroup still Pending with no pod yet: the enqueue action admits it (Inqueue) before any
    pod exists, since Volcano's job controller creates a vcjob's pods only once its PodGroup has
    left Pending. Call under the cluster cache's lock."""
    return job.group is not None and not job.members and (job.phase or "Pending") == "Pending"


def admitted_without_pods(job: JobState) -> bool:
    """A PodGroup already Inqueue with no pod yet: its minResources are reserved in its queue (and the
    queue's ancestors) until its pods come, as Volcano's capacity and proportion count every Inqueue
    job; left out of the session, the next PodGroup of the queue would be admitted into the same
    room. Call under the cluster cache's lock."""
    return job.group is not None and not job.members and job.phase == "Inqueue"


@dataclass(frozen=True)
class NodeFacts:
    """What a snapshot reads of the nodes alone: metadata per row, GPU model ids per row and their
    names, and the capacity of all nodes. Call `node_facts` under the cluster cache's lock."""

    metas: list[NodeMeta | None]
    model_ids: IntArray
    model_names: list[str]
    capacity: Resources


def node_facts(cache: ClusterCache) -> NodeFacts:
    table = cache.ledger.table
    metas = list(cache.meta_rows) + [None] * max(0, table.rows - len(cache.meta_rows))
    names = sorted({m.gpu_model for m in metas if m is not None and m.gpu_model})
    index = {n: i for i, n in enumerate(names)}
    model_ids = np.array([index.get(m.gpu_model, -1) if m is not None else -1 for m in metas], np.int64)
    rows = table.active_rows()
    nodes = cache.nodes
    capacity = Resources(
        int(sum(nodes[n].capacity.cpu_milli for n in nodes)),
        int(sum(nodes[n].capacity.memory_bytes for n in nodes)),
        int((table.gmem_total[rows] > 0).sum()) * 1000,
        functools.reduce(combine, (s.offered for s in nodes.values()), ()),
    )
    return NodeFacts(metas, model_ids, names, capacity)


def node_facts_kept(cache: ClusterCache) -> NodeFacts:
    """`node_facts`, worked out again only after a node event (`ClusterCache.node_version`): a pass
    over every node each session otherwise (about a third of a snapshot's time at 5,000 nodes).
    Snapshots share what is kept, as the extender's calls do; none changes it."""
    kept = cache.facts_kept
    if kept is not None and kept[0] == cache.node_version and isinstance(kept[1], NodeFacts):
        return kept[1]
    facts = node_facts(cache)
    cache.facts_kept = (cache.node_version, facts)
    return facts


def node_rank(cache: ClusterCache) -> IntArray:
    """The nodes' tie-break order: a permutation drawn from the cache's seed, kept while the table
    keeps its rows."""
    rows = cache.ledger.table.rows
    if cache.rank_cache is None or cache.rank_cache[0] != rows:
        cache.rank_cache = (rows, np.random.default_rng(cache.rank_seed).permutation(max(rows, 1))[:rows])
    return cache.rank_cache[1]


def _quotas(cache: ClusterCache) -> dict[str, tuple[NamespaceQuota, ...]]:
    """ResourceQuotas by namespace; where no quota controller has written `used`, what the
    namespace's bound pods use is worked out here (the embedded cluster has no such controller)."""
    out: dict[str, list[NamespaceQuota]] = {}
    for written in cache.quotas.values():
        quota = written
        if quota.used is None:
            pods = (t.pod for t in cache.running.values() if t.namespace == quota.namespace and t.pod is not None)
            quota = replace(quota, used=add_usage(pods))
        out.setdefault(quota.namespace, []).append(quota)
    return {namespace: tuple(quotas) for namespace, quotas in out.items()}


def _with_claims(cache: ClusterCache, task: TaskInfo, allocated_too: bool = False) -> TaskInfo:
    """A pending pod whose claims ask the kit's GPUs asks for them through its request, so gpushare
    places them and queues count them (`kubesem/drarequest.py`); any other pod is left as it is.
    `allocated_too`: a pod binding (its claims may be allocated already) counts them in its queue."""
    pod = task.pod
    if uses_claims(pod) and cache.kit_backed():
        whole = cache.protocol.rules.memory_default == "whole"
        task.request = with_claims(task.request, pod, cache.dra.claims(), whole, allocated_too)
    return task


def _job_info(cache: ClusterCache, job: JobState) -> JobInfo:
    group = job.group
    spec = (group.get("spec") or {}) if group is not None else {}
    min_member = spec.get("minMember", 1) if group is not None else 1
    pending, running = cache.queue.pending, cache.running
    members = [pending[m].task for m in job.members if m in pending] + [running[m] for m in job.members if m in running]
    if group is not None:  # Volcano: the PodGroup's PriorityClass (else the default), never its pods'
        priority = cache.priorities.job_priority(spec.get("priorityClassName"))
    else:  # a pod of its own: Volcano's PodGroup controller would copy its priorityClassName
        priority = max((t.priority for t in members), default=0)
    created = min((t.created for t in members), default=0.0)
    queue = queue_of(members[0].pod or {} if members else {}, group, cache.default_queue)
    phase = job.phase or ("Pending" if group is not None else "Inqueue")
    min_resources = None
    if group is not None and spec.get("minResources"):
        min_resources = resources_of(spec.get("minResources"), cache.protocol)
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
        has_podgroup=group is not None,
        waiting_time=waiting_time(group),
        quota_request=quota_request(group),
        min_task_member=min_task_member(spec.get("minTaskMember")),
    )


def min_task_member(value: object) -> dict[str, int]:
    """A PodGroup's spec.minTaskMember (task role -> minimum), its whole-number entries."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
