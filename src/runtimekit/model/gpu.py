"""GPUs and a node's GPU inventory, with the JSON codec of the node devices annotation.

The device plugin writes the inventory (from what the runtime reports) to the node annotation
named by `protocol.annotations.nodeDevices`; the scheduler reads it to build its ledger.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import NewType, NotRequired, TypedDict

GpuUUID = NewType("GpuUUID", str)
NodeName = NewType("NodeName", str)

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


class MigMode(StrEnum):
    """How a GPU is shared: time-division (`off`), pre-partitioned MIG, or MIG on demand."""

    OFF = "off"
    STATIC = "static"
    DYNAMIC = "dynamic"


@dataclass(frozen=True)
class GpuModelSpec:
    """A GPU product as the simulated backend and the simulator know it."""

    name: str
    memory_mib: int
    product: str
    mig_capable: bool = False


# Memory sizes are what NVML reports as total memory for the product (nvidia-smi's MiB figure).
# The openb trace's anonymised models (G2, G3) have no published size; 16/32 GiB stand in for them
# and only matter for pods that ask for GPU memory.
GPU_MODELS: Mapping[str, GpuModelSpec] = {
    spec.name: spec
    for spec in (
        GpuModelSpec("H200", 143771, "NVIDIA H200", mig_capable=True),
        GpuModelSpec("H100-80GB", 81559, "NVIDIA H100 80GB HBM3", mig_capable=True),
        GpuModelSpec("A100-80GB", 81920, "NVIDIA A100-SXM4-80GB", mig_capable=True),
        GpuModelSpec("A100-40GB", 40960, "NVIDIA A100-SXM4-40GB", mig_capable=True),
        # the PCIe and NVL boards of the same chips and memory: their own names (what the runtime
        # labels them, `short_model`), the same MIG layout as the SXM board (`model.mig`)
        GpuModelSpec("H200-NVL", 143771, "NVIDIA H200 NVL", mig_capable=True),
        GpuModelSpec("H100-PCIe", 81559, "NVIDIA H100 PCIe", mig_capable=True),
        GpuModelSpec("A100-80GB-PCIe", 81920, "NVIDIA A100 80GB PCIe", mig_capable=True),
        GpuModelSpec("A100-PCIE-40GB", 40960, "NVIDIA A100-PCIE-40GB", mig_capable=True),
        GpuModelSpec("A30", 24576, "NVIDIA A30", mig_capable=True),
        GpuModelSpec("L40S", 46068, "NVIDIA L40S"),
        GpuModelSpec("L4", 23034, "NVIDIA L4"),
        GpuModelSpec("A10", 23028, "NVIDIA A10"),
        GpuModelSpec("T4", 15360, "Tesla T4"),
        GpuModelSpec("V100M16", 16384, "Tesla V100-SXM2-16GB"),
        GpuModelSpec("V100M32", 32768, "Tesla V100-SXM2-32GB"),
        GpuModelSpec("P100", 16384, "Tesla P100-PCIE-16GB"),
        GpuModelSpec("G2", 16384, "openb G2"),
        GpuModelSpec("G3", 32768, "openb G3"),
    )
}
GPU_MODEL_ALIASES: Mapping[str, str] = {"H100": "H100-80GB", "A100": "A100-80GB"}


def gpu_model(name: str) -> GpuModelSpec:
    """Look up a built-in model by name or alias; KeyError lists the known names."""
    key = GPU_MODEL_ALIASES.get(name, name)
    try:
        return GPU_MODELS[key]
    except KeyError:
        known = ", ".join(sorted(GPU_MODELS))
        raise KeyError(f"unknown GPU model {name!r}; known models: {known}") from None


class MigInstanceJson(TypedDict):
    uuid: str
    profile: str
    start: int


class GpuJson(TypedDict):
    """One GPU in the node devices annotation (`NodeInventory.to_annotation`)."""

    index: int
    uuid: str
    model: str
    memoryMiB: int
    health: str
    migMode: str
    migDevices: NotRequired[list[MigInstanceJson]]


@dataclass(frozen=True)
class MigInstance:
    """A MIG device (GPU instance + compute instance) that exists on a GPU."""

    uuid: str
    profile: str
    start: int  # first memory slice

    def to_json(self) -> MigInstanceJson:
        return {"uuid": self.uuid, "profile": self.profile, "start": self.start}


@dataclass(frozen=True)
class Gpu:
    """One physical GPU of a node. `index` is the NVML index on that node."""

    index: int
    uuid: GpuUUID
    model: str
    memory_mib: int
    healthy: bool = True
    mig_mode: MigMode = MigMode.OFF
    mig_devices: tuple[MigInstance, ...] = ()

    def to_json(self) -> GpuJson:
        out: GpuJson = {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "memoryMiB": self.memory_mib,
            "health": HEALTHY if self.healthy else UNHEALTHY,
            "migMode": self.mig_mode.value,
        }
        if self.mig_devices:
            out["migDevices"] = [m.to_json() for m in self.mig_devices]
        return out


class InventoryError(ValueError):
    """A node devices annotation that cannot be read; the message says which field."""


@dataclass(frozen=True)
class NodeInventory:
    """The GPUs of one node, ordered by index."""

    node: NodeName
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        indexes = [gpu.index for gpu in self.gpus]
        if indexes != sorted(set(indexes)):
            raise InventoryError(f"node {self.node}: GPU indexes must be unique and ascending, got {indexes}")
        uuids = [gpu.uuid for gpu in self.gpus]
        if len(set(uuids)) != len(uuids):
            raise InventoryError(f"node {self.node}: duplicate GPU UUIDs")

    @property
    def model(self) -> str:
        """The node's GPU model (the first GPU's); empty for a node without GPUs."""
        return self.gpus[0].model if self.gpus else ""

    def by_uuid(self, uuid: str) -> Gpu | None:
        return next((gpu for gpu in self.gpus if gpu.uuid == uuid), None)

    def with_health(self, unhealthy: Sequence[str]) -> NodeInventory:
        bad = set(unhealthy)
        return replace(self, gpus=tuple(replace(g, healthy=g.uuid not in bad) for g in self.gpus))

    def cordoned(self, uuids: Sequence[str]) -> NodeInventory:
        """The inventory with the GPUs in `uuids` unusable for new pods, as unhealthy ones are (HAMi's
        `hami.io/device-cordon`: the pods already on them stay)."""
        out = set(uuids)
        if not out.intersection(g.uuid for g in self.gpus):
            return self
        return replace(self, gpus=tuple(replace(g, healthy=g.healthy and g.uuid not in out) for g in self.gpus))

    def to_annotation(self) -> str:
        return json.dumps({"version": 1, "gpus": [gpu.to_json() for gpu in self.gpus]}, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, node: str, text: str) -> NodeInventory:
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise InventoryError(f"node {node}: devices annotation is not JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
            raise InventoryError(f"node {node}: devices annotation needs a 'gpus' list")
        gpus = tuple(_gpu_from_json(node, i, item) for i, item in enumerate(data["gpus"]))
        return cls(NodeName(node), tuple(sorted(gpus, key=lambda g: g.index)))

    @classmethod
    def simulated(
        cls, node: str, model: str, count: int, memory_mib: int | None = None, mig_mode: MigMode = MigMode.OFF
    ) -> NodeInventory:
        """`count` GPUs of a model with deterministic UUIDs derived from the node name."""
        size = memory_mib if memory_mib is not None else gpu_model(model).memory_mib
        return cls(
            NodeName(node),
            tuple(Gpu(i, simulated_uuid(node, i), model, size, mig_mode=mig_mode) for i in range(count)),
        )


def offered_memory_mib(memory_mib: int, mig_mode: MigMode, scaling: float) -> int:
    """The memory a GPU offers to shares: its own times `rules.memoryScaling` (HAMi's
    deviceMemoryScaling, rounded down as HAMi's device plugin registers it), except in MIG mode, where
    the slices are the hardware's."""
    if scaling == 1.0 or mig_mode is not MigMode.OFF:
        return memory_mib
    return int(memory_mib * scaling)


def offered_inventory(inventory: NodeInventory, scaling: float) -> NodeInventory:
    """`inventory` with each GPU's offered memory (`offered_memory_mib`)."""
    if scaling == 1.0:
        return inventory
    gpus = tuple(replace(g, memory_mib=offered_memory_mib(g.memory_mib, g.mig_mode, scaling)) for g in inventory.gpus)
    return replace(inventory, gpus=gpus)


def simulated_uuid(node: str, index: int) -> GpuUUID:
    """A stable, UUID-shaped identifier for simulated GPU `index` of `node`."""
    import hashlib

    digest = hashlib.sha1(f"{node}/{index}".encode()).hexdigest()
    return GpuUUID(f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}")


def _gpu_from_json(node: str, position: int, item: object) -> Gpu:
    where = f"node {node}: gpus[{position}]"
    if not isinstance(item, dict):
        raise InventoryError(f"{where} is not an object")
    try:
        index, uuid, model, memory = item["index"], item["uuid"], item.get("model", ""), item["memoryMiB"]
    except KeyError as exc:
        raise InventoryError(f"{where} lacks {exc.args[0]!r}") from None
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise InventoryError(f"{where}.index must be a non-negative integer")
    if not isinstance(memory, int) or isinstance(memory, bool) or memory <= 0:
        raise InventoryError(f"{where}.memoryMiB must be a positive integer")
    if not isinstance(uuid, str) or not uuid:
        raise InventoryError(f"{where}.uuid must be a non-empty string")
    health = item.get("health", HEALTHY)
    if health not in (HEALTHY, UNHEALTHY):
        raise InventoryError(f"{where}.health must be {HEALTHY} or {UNHEALTHY}")
    try:
        mig = MigMode(item.get("migMode", "off"))
    except ValueError:
        raise InventoryError(f"{where}.migMode must be off, static or dynamic") from None
    devices = []
    for j, dev in enumerate(item.get("migDevices") or []):
        if (
            not isinstance(dev, dict)
            or not isinstance(dev.get("profile"), str)
            or not isinstance(dev.get("start"), int)
        ):
            raise InventoryError(f"{where}.migDevices[{j}] needs a profile and an integer start")
        devices.append(MigInstance(str(dev.get("uuid", "")), dev["profile"], dev["start"]))
    return Gpu(index, GpuUUID(uuid), str(model), memory, health == HEALTHY, mig, tuple(devices))
