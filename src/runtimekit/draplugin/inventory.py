"""The node's GPUs as DRA devices: what a ResourceSlice lists, and what each device name stands for.

Called by the slice publisher (`devices_and_counters`) and by NodePrepareResources (`targets`, to
turn an allocation result's device name back into a GPU or MIG device for the runtime). Both read
the runtime's device list, so a name means the same in the slice and in the claim.

- A GPU with MIG off is `gpu-<index>`, shareable: `allowMultipleAllocations` (KEP-5075) with the
  consumable capacities `core` (percent, 100) and `memory` (bytes), each with a `requestPolicy`
  whose default is the whole amount, so a claim that names no capacity gets the whole GPU.
- A GPU in dynamic MIG mode is `gpu-<index>` (whole only) plus one partitionable device per MIG
  profile and placement, `gpu-<index>-mig-<profile>-<start>` (KEP-4815): each consumes its memory
  slices, compute slices and memory from the GPU's counter set `gpu-<index>-counters`, and the whole
  GPU consumes all of them, so the allocator never hands out overlapping parts.
- A GPU in static MIG mode offers its existing MIG devices only (no counters: they exist).
Unhealthy GPUs and MIG devices are left out. Attributes follow NVIDIA's driver (`type`, `uuid`,
`productName`, `cudaComputeCapability`, `profile`, `parentUUID`, ...) plus the kit's `model`,
`index` and `migCapable`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.kube.objects.dra import Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity

MIB = 1024 * 1024

# CUDA compute capability of the GPU models the kit knows (NVIDIA's CUDA GPUs table), by model prefix.
COMPUTE_CAPABILITY = (
    ("H200", "9.0"),
    ("H100", "9.0"),
    ("A100", "8.0"),
    ("A30", "8.0"),
    ("L40", "8.9"),
    ("L4", "8.9"),
    ("A10", "8.6"),
    ("T4", "7.5"),
    ("V100", "7.0"),
    ("P100", "6.0"),
)


@dataclass(frozen=True)
class Target:
    """What a published device name stands for on the runtime's side."""

    name: str
    gpu_uuid: str
    uuid: str  # the GPU, or the static MIG device; empty for a MIG placement the runtime makes on demand
    memory_mib: int
    mig_profile: str = ""
    mig_start: int = -1
    shareable: bool = False  # takes consumable-capacity shares

    @property
    def is_mig(self) -> bool:
        return bool(self.mig_profile)


def compute_capability(model: str) -> str:
    """`9.0` for an H200, or "" for a model not in the table."""
    return next((cc for prefix, cc in COMPUTE_CAPABILITY if model.startswith(prefix)), "")


def _label(text: str) -> str:
    return text.lower().replace(".", "-").replace("+", "-")


def mig_name(index: int, profile: str, start: int) -> str:
    return f"gpu-{index}-mig-{_label(profile)}-{start}"


def counter_set_name(index: int) -> str:
    return f"gpu-{index}-counters"


def _healthy(device: pb.Device) -> bool:
    return device.health != pb.HEALTH_UNHEALTHY


def _named(devices: Sequence[pb.Device]) -> Iterator[tuple[Target, bool]]:
    """Every device name the node has while its GPUs are healthy, what it stands for, and whether it is
    healthy now (a GPU's health is its parts' too)."""
    for gpu in devices:
        ok = _healthy(gpu)
        whole = Target(f"gpu-{gpu.index}", gpu.uuid, gpu.uuid, gpu.memory_mib, shareable=True)
        if gpu.mig_mode == pb.MIG_MODE_STATIC:
            for mig in gpu.mig_devices:
                if not mig.dynamic:
                    name = mig_name(gpu.index, mig.profile, mig.start)
                    target = Target(name, gpu.uuid, mig.uuid, mig.memory_mib, mig.profile, mig.start)
                    yield target, ok and mig.health != pb.HEALTH_UNHEALTHY
            continue
        if gpu.mig_mode == pb.MIG_MODE_DYNAMIC:
            yield Target(whole.name, gpu.uuid, gpu.uuid, gpu.memory_mib), ok
            for profile in gpu.mig_profiles:
                for start in profile.starts:
                    name = mig_name(gpu.index, profile.name, start)
                    yield Target(name, gpu.uuid, "", profile.memory_mib, profile.name, start), ok
            continue
        yield whole, ok


def targets(devices: Sequence[pb.Device]) -> dict[str, Target]:
    """Every published device name and what it stands for."""
    return {target.name: target for target, ok in _named(devices) if ok}


def device_health(devices: Sequence[pb.Device]) -> dict[str, bool]:
    """Every device name, published or left out for its health, and whether it is healthy: what the
    plugin reports to kubelet's health stream (a claim's device that turned unhealthy is still named)."""
    return {target.name: ok for target, ok in _named(devices)}


def _attributes(gpu: pb.Device, kind: str) -> dict[str, DeviceAttribute]:
    attributes: dict[str, DeviceAttribute] = {
        "type": {"string": kind},
        "productName": {"string": gpu.product},
        "model": {"string": gpu.model},
        "index": {"int": gpu.index},
        "migCapable": {"bool": bool(gpu.mig_profiles)},
    }
    capability = compute_capability(gpu.model)
    if capability:
        attributes["cudaComputeCapability"] = {"version": f"{capability}.0"}
    return attributes


def _memory(mib: int) -> str:
    return f"{mib}Mi"


def _gpu_device(gpu: pb.Device, target: Target, partitioned: bool) -> Device:
    device: Device = {"name": target.name, "attributes": {**_attributes(gpu, "gpu"), "uuid": {"string": gpu.uuid}}}
    memory = _memory(gpu.memory_mib)
    if target.shareable:
        device["allowMultipleAllocations"] = True
        device["capacity"] = {
            "core": {"value": "100", "requestPolicy": {"default": "100", "validRange": {"min": "1", "step": "1"}}},
            "memory": {
                "value": memory,
                "requestPolicy": {"default": memory, "validRange": {"min": "1Mi", "step": "1Mi"}},
            },
        }
    else:
        device["capacity"] = {"core": {"value": "100"}, "memory": {"value": memory}}
    if partitioned:  # the whole GPU takes every counter: no MIG device beside it
        device["consumesCounters"] = [
            {"counterSet": counter_set_name(gpu.index), "counters": {c: {"value": v} for c, v in _all(gpu).items()}}
        ]
    return device


def _slices(gpu: pb.Device) -> int:
    return max((max(p.starts, default=0) + p.size for p in gpu.mig_profiles), default=0)


def _compute(gpu: pb.Device) -> int:
    return max((p.compute_slices for p in gpu.mig_profiles), default=0)


def _all(gpu: pb.Device) -> dict[str, str]:
    """Every counter of a GPU's counter set at its full value."""
    counters = {f"memorySlice{i}": "1" for i in range(_slices(gpu))}
    return {**counters, "computeSlices": str(_compute(gpu)), "memory": _memory(gpu.memory_mib)}


def _mig_device(gpu: pb.Device, target: Target, size: int, compute: int, dynamic: bool) -> Device:
    attributes: dict[str, DeviceAttribute] = {
        **_attributes(gpu, "mig"),
        "profile": {"string": target.mig_profile},
        "parentUUID": {"string": gpu.uuid},
        "parentIndex": {"int": gpu.index},
        "migCapable": {"bool": False},
    }
    if target.uuid:
        attributes["uuid"] = {"string": target.uuid}
    capacity: dict[str, DeviceCapacity] = {"memory": {"value": _memory(target.memory_mib)}}
    device: Device = {"name": target.name, "attributes": attributes, "capacity": capacity}
    if dynamic:
        counters: dict[str, Counter] = {
            f"memorySlice{i}": {"value": "1"} for i in range(target.mig_start, target.mig_start + size)
        }
        counters["computeSlices"] = {"value": str(compute)}
        counters["memory"] = {"value": _memory(target.memory_mib)}
        device["consumesCounters"] = [{"counterSet": counter_set_name(gpu.index), "counters": counters}]
    return device


def devices_and_counters(devices: Sequence[pb.Device]) -> tuple[list[Device], list[CounterSet]]:
    """The slice devices of the node's GPUs (in device order) and the counter sets they consume from."""
    named = targets(devices)
    listed: list[Device] = []
    counter_sets: list[CounterSet] = []
    for gpu in devices:
        if not _healthy(gpu):
            continue
        profiles = {p.name: p for p in gpu.mig_profiles}
        dynamic = gpu.mig_mode == pb.MIG_MODE_DYNAMIC
        if dynamic:
            full: dict[str, Counter] = {c: {"value": v} for c, v in _all(gpu).items()}
            counter_sets.append({"name": counter_set_name(gpu.index), "counters": full})
        for target in named.values():
            if target.gpu_uuid != gpu.uuid:
                continue
            if target.is_mig:
                profile = profiles.get(target.mig_profile)
                size, compute = (profile.size, profile.compute_slices) if profile is not None else (1, 1)
                listed.append(_mig_device(gpu, target, size, compute, dynamic))
            else:
                listed.append(_gpu_device(gpu, target, dynamic))
    return listed, counter_sets
