"""What the device plugin advertises to kubelet, per extended resource, from the runtime's GPUs.

Device ID scheme (stable across restarts: it depends only on GPU UUIDs and sizes):
- `resources.gpu`:    one device per GPU, ID `<gpu-uuid>`;
- `resources.core`:   100 devices per GPU (1 % each), IDs `<gpu-uuid>::0` … `<gpu-uuid>::99`;
- `resources.memory`: memory ÷ memory unit devices per GPU, IDs `<gpu-uuid>::0` … `::<units-1>`;
- `<migPrefix><profile>`: one device per MIG device of that profile, ID `<mig-uuid>`.
GPUs in MIG mode are advertised only through their MIG devices. A device is Unhealthy when its GPU
is. `gpu_of(id)` maps any ID back to its GPU (or MIG device) UUID by splitting on the first `::`,
as NVIDIA's replicas do (protocols.md §1.8). Pure functions over `runtimekit.v1` Device messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.protocol import Protocol

CORE_DEVICES_PER_GPU = 100
REPLICA_SEPARATOR = "::"


class ResourceKind(StrEnum):
    GPU = "gpu"
    CORE = "core"
    MEMORY = "memory"
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


def gpu_of(device_id: str) -> str:
    """The GPU (or MIG device) UUID a device ID belongs to."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def replica_ids(uuid: str, count: int) -> list[str]:
    return [f"{uuid}{REPLICA_SEPARATOR}{n}" for n in range(count)]


def _healthy(device: pb.Device) -> bool:
    return device.health == pb.HEALTH_HEALTHY


def _shareable(device: pb.Device) -> bool:
    return device.mig_mode in (pb.MIG_MODE_OFF, pb.MIG_MODE_UNSPECIFIED)


def resource_specs(devices: Iterable[pb.Device], protocol: Protocol) -> list[ResourceSpec]:
    """The resources to register: gpu, core and memory always, plus one per MIG profile present."""
    names = protocol.resources
    specs = [
        ResourceSpec(names.gpu, ResourceKind.GPU),
        ResourceSpec(names.core, ResourceKind.CORE),
        ResourceSpec(names.memory, ResourceKind.MEMORY),
    ]
    profiles = sorted({m.profile for d in devices if not _shareable(d) for m in d.mig_devices})
    specs += [ResourceSpec(names.mig_prefix + p, ResourceKind.MIG, p) for p in profiles]
    return specs


def advertised(spec: ResourceSpec, devices: Sequence[pb.Device], memory_unit_mib: int) -> list[AdvertisedDevice]:
    """The full device list of one resource, in GPU index order."""
    out: list[AdvertisedDevice] = []
    for device in devices:
        healthy, numa = _healthy(device), device.numa_node
        if spec.kind is ResourceKind.MIG:
            out += [
                AdvertisedDevice(m.uuid, healthy and m.health != pb.HEALTH_UNHEALTHY, numa)
                for m in device.mig_devices
                if m.profile == spec.mig_profile
            ]
            continue
        if not _shareable(device):
            continue
        if spec.kind is ResourceKind.GPU:
            ids = [device.uuid]
        elif spec.kind is ResourceKind.CORE:
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
