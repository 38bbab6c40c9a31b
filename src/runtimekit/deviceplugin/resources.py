"""What the device plugin advertises to kubelet, per extended resource, from the runtime's GPUs.

Device ID scheme (stable across restarts: it depends only on GPU UUIDs, sizes and MIG layouts):
- `resources.gpu`:    one device per GPU, ID `<gpu-uuid>`; with `resources.gpuReplicas` R > 1 (HAMi's
  and Volcano's split count, so that shares asking for it can sit on one GPU), R devices per GPU,
  IDs `<gpu-uuid>::0` … `::<R-1>`;
- `resources.core`:   100 devices per GPU (1 % each), IDs `<gpu-uuid>::0` … `<gpu-uuid>::99`;
- `resources.memory`: memory ÷ memory unit devices per GPU, IDs `<gpu-uuid>::0` … `::<units-1>`;
  not registered with `resources.memoryAdvertised: false` (MiB units would make hundreds of
  thousands of devices; kubelet lets a resource no plugin registers through, as HAMi relies on);
- `resources.memoryPercent`: 100 devices per GPU (1 % of its memory each), as core;
- each alias of these (`aliases.*`) is registered too, with the same devices, so kubelet calls
  Allocate whichever name a container uses;
- `<migPrefix><profile>` on a GPU in static MIG mode: one device per existing MIG device of that
  profile, ID `<mig-uuid>`;
- `<migPrefix><profile>` on a GPU in dynamic MIG mode: as many devices as instances of the profile
  fit on the empty GPU, IDs `<gpu-uuid>::<profile>::0` … `::<max-1>` (e.g. 7 for 1g.10gb, 2 for
  3g.40gb on an A100-80GB). kubelet counts each profile on its own, so it may admit more slices than
  fit at once across profiles; the scheduler's ledger is what prevents that, and the runtime refuses
  an overlapping instance.
GPUs in MIG mode are advertised only through their MIG profiles: a MIG GPU is never shared by time.
A device is Unhealthy when its GPU is. `gpu_of(id)` maps any ID back to its GPU (or static MIG
device) UUID by splitting on the first `::`, as NVIDIA's replicas do (protocols.md §1.8); `target`
says the same of an assigned share. Pure functions over `runtimekit.v1` Device messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.model import GpuShare
from runtimekit.protocol import KitProtocol

CORE_DEVICES_PER_GPU = 100
REPLICA_SEPARATOR = "::"


class ResourceKind(StrEnum):
    GPU = "gpu"
    CORE = "core"
    MEMORY = "memory"
    MEMORY_PERCENT = "memoryPercent"
    MIG = "mig"


@dataclass(frozen=True)
class AdvertisedDevice:
    id: str
    healthy: bool
    numa_node: int = -1


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    kind: ResourceKind
    mig_profile: str = ""
    replicas: int = 1  # devices per GPU of a GPU resource


def gpu_of(device_id: str) -> str:
    """The GPU (or MIG device) UUID a device ID belongs to."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def replica_ids(uuid: str, count: int) -> list[str]:
    return [f"{uuid}{REPLICA_SEPARATOR}{n}" for n in range(count)]


def _healthy(device: pb.Device) -> bool:
    return device.health == pb.HEALTH_HEALTHY


def _shareable(device: pb.Device) -> bool:
    return device.mig_mode in (pb.MIG_MODE_OFF, pb.MIG_MODE_UNSPECIFIED)


def target(share: GpuShare) -> str:
    """The GPU (or static MIG device) an assigned share's device IDs belong to, as `gpu_of` reads them:
    a dynamic MIG share (no UUID yet) belongs to its GPU."""
    return share.uuid or share.parent_uuid or ""


def offered_profiles(device: pb.Device) -> list[str]:
    """The MIG profiles a GPU offers pods: its devices' (static) or every profile it has (dynamic)."""
    if device.mig_mode == pb.MIG_MODE_STATIC:
        return [m.profile for m in device.mig_devices]
    if device.mig_mode == pb.MIG_MODE_DYNAMIC:
        return [p.name for p in device.mig_profiles if p.max_instances > 0]
    return []


def dynamic_ids(device: pb.Device, profile: str) -> list[str]:
    """The device IDs of a profile on a GPU in dynamic MIG mode."""
    found = next((p for p in device.mig_profiles if p.name == profile), None)
    count = found.max_instances if found is not None else 0
    return [f"{device.uuid}{REPLICA_SEPARATOR}{profile}{REPLICA_SEPARATOR}{k}" for k in range(count)]


def resource_specs(devices: Iterable[pb.Device], protocol: KitProtocol) -> list[ResourceSpec]:
    """The resources to register under every name they have: gpu and core always, memory unless the
    protocol keeps it from kubelet, memoryPercent when the protocol has it, plus one per MIG profile
    offered."""
    names = protocol.resources
    replicas = names.gpu_replicas
    specs = [ResourceSpec(name, ResourceKind.GPU, replicas=replicas) for name in protocol.names("gpu")]
    specs += [ResourceSpec(name, ResourceKind.CORE) for name in protocol.names("core")]
    if names.memory_advertised:
        specs += [ResourceSpec(name, ResourceKind.MEMORY) for name in protocol.names("memory")]
    specs += [ResourceSpec(name, ResourceKind.MEMORY_PERCENT) for name in protocol.names("memoryPercent")]
    profiles = sorted({p for d in devices for p in offered_profiles(d)})
    specs += [ResourceSpec(names.mig_prefix + p, ResourceKind.MIG, p) for p in profiles]
    return specs


def advertised(spec: ResourceSpec, devices: Sequence[pb.Device], memory_unit_mib: int) -> list[AdvertisedDevice]:
    """The full device list of one resource, in GPU index order."""
    out: list[AdvertisedDevice] = []
    for device in devices:
        healthy, numa = _healthy(device), device.numa_node
        if spec.kind is ResourceKind.MIG:
            if device.mig_mode == pb.MIG_MODE_DYNAMIC:
                out += [AdvertisedDevice(i, healthy, numa) for i in dynamic_ids(device, spec.mig_profile)]
            elif device.mig_mode == pb.MIG_MODE_STATIC:
                out += [
                    AdvertisedDevice(m.uuid, healthy and m.health != pb.HEALTH_UNHEALTHY, numa)
                    for m in device.mig_devices
                    if m.profile == spec.mig_profile
                ]
            continue
        if not _shareable(device):
            continue
        if spec.kind is ResourceKind.GPU:
            ids = [device.uuid] if spec.replicas == 1 else replica_ids(device.uuid, spec.replicas)
        elif spec.kind in (ResourceKind.CORE, ResourceKind.MEMORY_PERCENT):
            ids = replica_ids(device.uuid, CORE_DEVICES_PER_GPU)
        else:
            ids = replica_ids(device.uuid, device.memory_mib // memory_unit_mib)
        out += [AdvertisedDevice(i, healthy, numa) for i in ids]
    return out


def socket_name(resource: str) -> str:
    """The plugin's socket file name for a resource (kubelet joins it to its plugin dir)."""
    safe = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in resource)
    return f"lj-runtimekit-{safe}.sock"


def by_gpu(ids: Iterable[str]) -> Mapping[str, list[str]]:
    """Device IDs grouped by their GPU, keeping order."""
    groups: dict[str, list[str]] = {}
    for device_id in ids:
        groups.setdefault(gpu_of(device_id), []).append(device_id)
    return groups
