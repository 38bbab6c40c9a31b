"""What each container really uses on its GPUs: the per-container reading and how it is put together.

The values here are the one data model of per-container usage, shared by the runtime (which fills
it), its gRPC API (`ExporterGetDataList.container_usage`), the exporter and `runtimekit inspect`:
- `GpuProcess`: one process on one GPU (or MIG device) as the driver reports it (`nvml.NvmlBackend`);
- `ContainerUsage`: one container's use of one granted GPU or MIG device, with the share granted;
- `GpuRemainder`: what no container accounts for on a GPU (memory the driver lists under no process,
  processes outside any pod, processes of containers the runtime has no allocation for);
- `UsageReading`: all of them for one node at one instant.
`attribute` joins processes (already mapped to a pod uid and container name, `cgroups`) with the
runtime's allocations; `remainders` subtracts what containers account for from each GPU's reading.
Every allocated container has a `ContainerUsage` on each of its grants, zero when nothing of it runs.
Pure functions; callers: `service.NodeRuntime.exporter_data` and the simulated usage model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from runtimekit.kube.objects import Pod
from runtimekit.model import GpuUUID
from runtimekit.runtime.allocations import Allocation, Grant

# A container may briefly run over its compute share where nothing enforces it (time slicing without
# MPS); more than this many percentage points over it counts as over its share.
CORE_SLACK_PERCENT = 5.0


@dataclass(frozen=True)
class GpuProcess:
    """One process on one GPU. `device_uuid` is the MIG device it runs on, else the GPU's UUID;
    `sm_percent` is None where the driver gives no per-process utilisation (MIG, old drivers)."""

    pid: int
    gpu_uuid: GpuUUID
    device_uuid: str
    memory_mib: int
    sm_percent: float | None = None


@dataclass(frozen=True)
class ProcessOwner:
    """The container a process belongs to: its pod's uid and the container's name ("": not known)."""

    pod_uid: str
    container: str


@dataclass(frozen=True)
class ContainerUsage:
    """One container's use of one grant (a GPU share or a MIG device) and the share granted.

    `sm_percent` is None when the source cannot say (per-process utilisation unsupported)."""

    namespace: str
    pod: str
    pod_uid: str
    container: str
    gpu_uuid: GpuUUID  # the physical GPU
    device_uuid: str  # the MIG device, else the GPU's UUID
    memory_used_mib: int
    sm_percent: float | None
    core_milli: int  # granted; 0: no compute share named
    memory_mib: int  # granted; 0: no memory share named
    pids: tuple[int, ...] = ()

    @property
    def over_memory(self) -> bool:
        return self.memory_mib > 0 and self.memory_used_mib > self.memory_mib

    @property
    def over_core(self) -> bool:
        return self.core_milli > 0 and (self.sm_percent or 0.0) > self.core_milli / 10.0 + CORE_SLACK_PERCENT

    @property
    def over_share(self) -> bool:
        return self.over_memory or self.over_core


@dataclass(frozen=True)
class GpuRemainder:
    """What no container accounts for on one GPU: its memory in use and utilisation less the containers'."""

    gpu_uuid: GpuUUID
    memory_mib: int
    sm_percent: float | None


@dataclass(frozen=True)
class UsageReading:
    """Per-container usage of one node. `source`: `nvml`, `simulated`, or `none` (no reading)."""

    containers: tuple[ContainerUsage, ...] = ()
    unattributed: tuple[GpuRemainder, ...] = ()
    source: str = "none"


class ProcessSource(Protocol):
    """A backend that lists the processes on its GPUs (the NVML one)."""

    def processes(self) -> Sequence[GpuProcess]:
        """Every process on every GPU (on each MIG device of a GPU in MIG mode); a GPU that cannot be
        read is left out. Never raises for a driver error."""
        ...


class UsageSource(Protocol):
    """Where the runtime gets each container's usage: attributed processes (NVML) or a model (simulated)."""

    @property
    def name(self) -> str:
        """`nvml` or `simulated`: `UsageReading.source`."""
        ...

    def containers(self, allocations: Sequence[Allocation], pods: Mapping[str, Pod]) -> list[ContainerUsage]:
        """The usage of every grant of `allocations` (`pods`: the node's pods by uid, as last listed)."""
        ...


def grant_usage(allocation: Allocation, grant: Grant, used_mib: int = 0, sm: float | None = None) -> ContainerUsage:
    """The usage row of one grant of `allocation`: what it was granted, and what it used (none yet by
    default; the attribution adds processes, the simulated model its own figures)."""
    pod = allocation.pod
    return ContainerUsage(
        pod.namespace,
        pod.name,
        pod.uid,
        allocation.container,
        GpuUUID(grant.gpu_uuid),
        grant.uuid,
        used_mib,
        sm,
        grant.core_milli,
        grant.memory_mib,
    )


def attribute(
    processes: Iterable[GpuProcess],
    owner_of: Callable[[int], ProcessOwner | None],
    allocations: Sequence[Allocation],
) -> tuple[list[ContainerUsage], list[GpuProcess]]:
    """Each allocated container's usage on each of its grants, and the processes no grant accounts for.

    A process counts for the container `owner_of(pid)` names when that container holds a grant on the
    device the process runs on (its MIG device, else its GPU); when the owner's container is not known,
    for the pod's one container holding that device (the identity the allocations keep). Utilisation
    sums over the container's processes; it stays None when no process of it has a reading."""
    slots: dict[tuple[str, str, str], ContainerUsage] = {}
    for allocation in allocations:
        for grant in allocation.grants:
            if grant.uuid:  # a dynamic MIG placeholder not made yet has no device to run on
                slots[(allocation.pod.uid, allocation.container, grant.uuid)] = grant_usage(allocation, grant)
    holders: dict[tuple[str, str], list[str]] = {}  # (pod uid, device) -> the pod's containers granted it
    for uid, container, device in slots:
        holders.setdefault((uid, device), []).append(container)
    leftover: list[GpuProcess] = []
    for process in processes:
        owner = owner_of(process.pid)
        key = _slot(owner, process.device_uuid, holders) if owner is not None else None
        found = slots.get(key) if key is not None else None
        if key is None or found is None:
            leftover.append(process)
            continue
        sm = found.sm_percent
        if process.sm_percent is not None:
            sm = (sm or 0.0) + process.sm_percent
        slots[key] = replace(
            found,
            memory_used_mib=found.memory_used_mib + process.memory_mib,
            sm_percent=sm,
            pids=(*found.pids, process.pid),
        )
    return list(slots.values()), leftover


def _slot(owner: ProcessOwner, device: str, holders: Mapping[tuple[str, str], list[str]]) -> tuple[str, str, str]:
    container = owner.container
    if not container:
        held = holders.get((owner.pod_uid, device), [])
        container = held[0] if len(held) == 1 else ""
    return owner.pod_uid, container, device


def remainders(
    gpus: Mapping[GpuUUID, tuple[int, float | None]], containers: Iterable[ContainerUsage]
) -> list[GpuRemainder]:
    """Per GPU (`gpus`: memory used MiB and utilisation % as the GPU reports them, in GPU order), what
    the containers do not account for, never below zero."""
    memory: dict[str, int] = {}
    sm: dict[str, float] = {}
    for usage in containers:
        memory[usage.gpu_uuid] = memory.get(usage.gpu_uuid, 0) + usage.memory_used_mib
        sm[usage.gpu_uuid] = sm.get(usage.gpu_uuid, 0.0) + (usage.sm_percent or 0.0)
    out = []
    for uuid, (used_mib, util) in gpus.items():
        rest = None if util is None else max(0.0, util - sm.get(uuid, 0.0))
        out.append(GpuRemainder(uuid, max(0, used_mib - memory.get(uuid, 0)), rest))
    return out


def per_gpu(containers: Iterable[ContainerUsage]) -> dict[str, tuple[float, int]]:
    """GPU UUID -> what its containers use together: SM utilisation % and memory MiB."""
    out: dict[str, tuple[float, int]] = {}
    for usage in containers:
        sm, mib = out.get(usage.gpu_uuid, (0.0, 0))
        out[usage.gpu_uuid] = (sm + (usage.sm_percent or 0.0), mib + usage.memory_used_mib)
    return out
