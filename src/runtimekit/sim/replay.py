"""Replay one arrival sequence through the scheduling framework with one placement policy.

Every pod arrives alone and is scheduled in a session of its own (actions: allocate; plugins:
gpushare with the policy), exactly as the live scheduler would schedule it; a pod that fits
nowhere is dropped but counted as arrived; pods never leave. On a cluster with nodes in MIG mode
(sim/mig_nodes.py) the `mig` plugin runs beside gpushare, as in the scheduler's default conf, and a
share pod that fits a profile asks for a slice first and for its share in a second session (as a
new pod) where no slice is free; either way it counts its trace share. Callers: `runtimekit
simulate`, benchmarks, tests. Given a `DraPublication`, every pod asks for its GPUs through a
ResourceClaim instead (`sim.claims`; plugins: dynamicresources and gpushare); MIG nodes are not
replayed that way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runtimekit.kube.objects import ResourceSlice
from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
    PodRequest,
)
from runtimekit.model.trace import TraceError, TraceNode, TracePod
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.collector import fewer_collections
from runtimekit.scheduler.framework import JobInfo, NodeMeta, TaskInfo, TaskStatus
from runtimekit.scheduler.framework.conf import PluginOption, SchedulerConf, Tier
from runtimekit.scheduler.framework.framework import Framework
from runtimekit.scheduler.framework.info import JobKey
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework, placement_conf
from runtimekit.scheduler.policies import PodType, TargetWorkload
from runtimekit.sim.arrivals import Arrivals
from runtimekit.sim.claims import ClaimSide, DraPublication
from runtimekit.sim.columns import bucket_columns
from runtimekit.sim.mig_nodes import MigRule, mig_inventory

NODE_POD_LIMIT = 1001  # the artifact's pod-count filter
MIB = 1 << 20  # traces count memory in MiB; the scheduler in bytes


@dataclass(frozen=True)
class Placed:
    """Where one arrival went (recorded on request): its index, the node, and per GPU its UUID and the
    milli-GPU taken there, as the ledger booked it (`booked`) and as the pod's claim was allocated
    (`claimed`: empty on the device-plugin path)."""

    index: int
    node: str
    booked: tuple[tuple[str, int], ...]
    claimed: tuple[tuple[str, int], ...] = ()

    @property
    def gpus(self) -> tuple[tuple[str, int], ...]:
        """What the pod got: its claim's devices when it asked through one, else the ledger's slots."""
        return self.claimed or self.booked


@dataclass
class ReplayResult:
    policy: str
    seed: int
    columns: dict[str, float | None]
    arrived_pods: int
    failed_pods: int
    total_gpus: int
    seconds: float
    arrived_milli: list[int] = field(default_factory=list, repr=False)
    used_milli: list[int] = field(default_factory=list, repr=False)
    placed: list[int] = field(default_factory=list, repr=False)  # indices of the pods placed, in order
    where: list[Placed] = field(default_factory=list, repr=False)  # with `record`: each placed pod's GPUs

    def to_json(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "seed": self.seed,
            "columns": self.columns,
            "arrived_pods": self.arrived_pods,
            "failed_pods": self.failed_pods,
            "total_gpus": self.total_gpus,
            "seconds": round(self.seconds, 3),
        }


def target_workload(pods: Sequence[TracePod]) -> TargetWorkload:
    """FGD's target workload: the pod types of the original (untuned) list."""
    return TargetWorkload.from_types(_pod_type(p) for p in pods)


def _pod_type(pod: TracePod) -> PodType:
    if not pod.num_gpu:
        return PodType(pod.cpu_milli, 0, 0, "")
    return PodType(pod.cpu_milli, pod.gpu_milli, pod.num_gpu, pod.gpu_spec)


def pod_request(pod: TracePod) -> PodRequest:
    """A trace pod as a request: whole GPUs when the share is 1000, else shares; no GPU memory."""
    if not pod.num_gpu or not pod.gpu_milli:
        return PodRequest(pod.cpu_milli, pod.memory_mib * MIB)
    if pod.gpu_milli >= 1000:
        gpu = GpuRequest(GpuKind.WHOLE, pod.num_gpu)
    else:
        gpu = GpuRequest(GpuKind.SHARE, pod.num_gpu, pod.gpu_milli, 0)
    return PodRequest(pod.cpu_milli, pod.memory_mib * MIB, (ContainerGpuRequest("main", gpu),))


def mig_request(pod: TracePod, profile: str) -> PodRequest:
    """A trace pod asking for one MIG instance of `profile` instead of its share."""
    gpu = GpuRequest(GpuKind.MIG, 1, 0, None, profile)
    return PodRequest(pod.cpu_milli, pod.memory_mib * MIB, (ContainerGpuRequest("main", gpu),))


def replay_conf(policy: str, mig: bool, claims: bool = False) -> SchedulerConf:
    """`placement_conf(policy, claims)`, with the `mig` plugin beside gpushare where the cluster has
    MIG GPUs."""
    conf = placement_conf(policy, claims=claims)
    if not mig:
        return conf
    return SchedulerConf(conf.actions, (Tier((*conf.tiers[0].plugins, PluginOption("mig", {}))),), source=conf.source)


def node_entries(nodes: Sequence[TraceNode]) -> list[tuple[NodeInventory, NodeCapacity, NodeMeta]]:
    out = []
    for node in nodes:
        if node.mig:
            inventory = mig_inventory(node)
        elif node.gpus:
            inventory = NodeInventory.simulated(node.name, node.model, node.gpus)
        else:
            inventory = NodeInventory(NodeName(node.name))
        meta = NodeMeta(inventory.node, {}, (), False, node.model if node.gpus else "")
        out.append((inventory, NodeCapacity(node.cpu_milli, node.memory_mib * MIB, NODE_POD_LIMIT), meta))
    return out


class Cluster:
    """A node list built once into the scheduler's node table; every replay on it starts from a
    copy (building 1,213 nodes costs about as much as scheduling a thousand pods)."""

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        self.total_gpus = sum(n.gpus for n in nodes)
        self.mig = MigRule(nodes)
        entries = node_entries(nodes)
        self._inventories = [inventory for inventory, _, _ in entries]
        self._empty = StaticCache(entries, share_table=True)
        self._slices: dict[Callable[[NodeInventory], list[ResourceSlice]], tuple[ResourceSlice, ...]] = {}

    def cache(self, rank: Mapping[str, int]) -> StaticCache:
        """An empty cluster with the tie-break rank of one seed."""
        return self._empty.fresh(rank)

    def slices(self, publication: DraPublication) -> tuple[ResourceSlice, ...]:
        """The nodes' ResourceSlices as `publication` publishes them (built once per publication)."""
        key = publication.slices  # the builder: a function, so the key is hashable and stable across calls
        if key not in self._slices:
            self._slices[key] = publication.node_slices(self._inventories)
        return self._slices[key]


def replay(
    nodes: Sequence[TraceNode] | Cluster,
    arrivals: Arrivals,
    policy: str,
    seed: int,
    workload: TargetWorkload | None,
    progress: Callable[[int], None] | None = None,
    claims: DraPublication | None = None,
    record: bool = False,
) -> ReplayResult:
    """Schedule the arrivals in order with one policy and report the allocation columns; `claims`:
    every pod asks through a ResourceClaim of the published GPUs; `record`: keep where each placed
    pod went (`ReplayResult.where`). Given a `Cluster`, the time reported leaves out building its
    nodes (and their slices, once built)."""
    started = time.perf_counter()
    cluster = nodes if isinstance(nodes, Cluster) else Cluster(nodes)
    has_mig = bool(cluster.mig)
    if claims is not None and has_mig:
        raise TraceError("the node list has nodes in MIG mode, which a replay through ResourceClaims does not take")
    cache = cluster.cache(arrivals.node_rank)
    side = None
    if claims is not None:
        side = ClaimSide(claims, cluster.slices(claims), cache.dra)
        cache.claim_access = side.access
    conf = replay_conf(policy, has_mig, claims=side is not None)
    framework = build_framework(FrameworkConfig(conf, seed, workload=workload, explain=False))
    total_gpus = cluster.total_gpus
    # one request object per distinct pod shape: plugins remember what they read of a request by it
    requests: dict[tuple[int, int, int, int, str], tuple[PodRequest, frozenset[str] | None, int]] = {}
    slices: dict[tuple[int, int, str], PodRequest] = {}  # the MIG form of a request, by CPU, memory and profile
    arrived = used = failed = 0
    arrived_series: list[int] = []
    used_series: list[int] = []
    placed: list[int] = []
    where: list[Placed] = []
    with fewer_collections():  # the caches grow large; see runtimekit.scheduler.collector
        for i, pod in enumerate(arrivals.pods):
            shape = (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_spec)
            found = requests.get(shape)
            if found is None:
                found = requests[shape] = (pod_request(pod), pod.allowed_models(), pod.total_gpu_milli)
            request, models, gpu_milli = found
            arrived += gpu_milli
            profile = cluster.mig.profile(pod) if has_mig else None
            task = None
            if profile is not None:
                sliced = slices.get((pod.cpu_milli, pod.memory_mib, profile))
                if sliced is None:
                    sliced = slices[(pod.cpu_milli, pod.memory_mib, profile)] = mig_request(pod, profile)
                task = _schedule(framework, cache, pod, pod.name, sliced, models, i, None)
            # the share where no slice was free: a new pod (a name no pod of the trace has)
            if task is None or task.status is not TaskStatus.BOUND:
                if task is not None:
                    cache.remove_job(task.job)
                name = pod.name + ("~share" if profile else "")
                task = _schedule(framework, cache, pod, name, request, models, i, side)
            if task.status is TaskStatus.BOUND:
                used += gpu_milli
                placed.append(i)
                if record:
                    where.append(_placed(i, task, cache, side))
            else:
                failed += 1
            if side is not None:
                side.settle(task)
            cache.remove_job(task.job)
            arrived_series.append(arrived)
            used_series.append(used)
            if progress is not None and i % 256 == 255:
                progress(256)
    if progress is not None:
        progress(len(arrivals.pods) % 256)
    return ReplayResult(
        policy,
        seed,
        bucket_columns(arrived_series, used_series, total_gpus),
        len(arrivals.pods),
        failed,
        total_gpus,
        time.perf_counter() - started,
        arrived_series,
        used_series,
        placed,
        where,
    )


def _schedule(
    framework: Framework,
    cache: StaticCache,
    pod: TracePod,
    name: str,
    request: PodRequest,
    models: frozenset[str] | None,
    i: int,
    side: ClaimSide | None,
) -> TaskInfo:
    """One pod in a session of its own (through a claim given `side`); its job stays in the cache
    until the caller has read where it went."""
    job_key = JobKey(name)
    if side is None:
        task = TaskInfo(PodKey(name), "default", name, job_key, request, created=float(i), gpu_models=models)
    else:
        task = side.task(i, pod, request, models)
    job = JobInfo(job_key, "default", name, created=float(i))
    job.add(task)
    cache.add_job(job)
    framework.run_once(cache)
    return task


def _placed(index: int, task: TaskInfo, cache: StaticCache, side: ClaimSide | None) -> Placed:
    assert task.node is not None
    gpus = cache.ledger.table.inventory(task.node).gpus
    slots = task.placement.slots if task.placement is not None else ()
    booked = tuple((gpus[s.gpu].uuid, s.core_milli) for s in slots)
    claimed = tuple((d.uuid, d.milli) for d in side.devices(task)) if side is not None else ()
    return Placed(index, str(task.node), booked, claimed)
