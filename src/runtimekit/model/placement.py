"""What the ledger books: a pod's `Placement` on one node (CPU, memory, GPU slots, scalar
resources), taken and given back as a unit; a node's `NodeCapacity`; and the translation between
placements and the scheduler's assignment annotations. Pure values and functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NewType

import numpy as np
import numpy.typing as npt

from runtimekit.model.assignment import Assignment, GpuShare
from runtimekit.model.gpu import GpuUUID, NodeInventory, NodeName
from runtimekit.model.scalars import Scalars

PodKey = NewType("PodKey", str)
MILLI = 1000
NO_GPU = -1  # core_free of a column where the node has no GPU

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class LedgerError(Exception):
    """A placement the ledger refuses (it would go negative, over capacity, or names no GPU)."""


@dataclass(frozen=True)
class Slot:
    """A share of one GPU, or a MIG slice of it. `gpu` is the GPU's position in the node's inventory
    (its column). A MIG slot names the profile and the first memory slice of the instance."""

    gpu: int
    core_milli: int
    memory_mib: int
    mig_profile: str = ""
    mig_start: int = -1

    @property
    def is_mig(self) -> bool:
        return bool(self.mig_profile)


@dataclass(frozen=True)
class Placement:
    """Everything one pod takes on one node. Taken and given back as a unit."""

    node: NodeName
    cpu_milli: int = 0
    memory_bytes: int = 0  # the pod's memory (GPU memory is the slots', in MiB)
    slots: tuple[Slot, ...] = ()
    scalars: Scalars = ()  # extended resources, storage and huge pages the pod takes

    @property
    def gpu_milli(self) -> int:
        return sum(s.core_milli for s in self.slots)


@dataclass(frozen=True)
class NodeCapacity:
    """What a node offers to pods besides GPUs (its allocatable)."""

    cpu_milli: int
    memory_bytes: int
    pods: int = 110
    scalars: Scalars = ()  # allocatable extended resources, storage and huge pages


def per_gpu(placement: Placement, gpu_count: int) -> dict[int, list[int]]:
    """Core and memory per GPU column of a placement on a node with `gpu_count` GPUs (MIG slots
    left out: their slices are booked apart). Raises LedgerError for a malformed slot."""
    per: dict[int, list[int]] = {}
    for slot in placement.slots:
        if not 0 <= slot.gpu < gpu_count:
            raise LedgerError(f"node {placement.node!r} has no GPU at position {slot.gpu}")
        if slot.is_mig:
            continue
        if slot.core_milli < 0 or slot.memory_mib < 0:
            raise LedgerError("a slot's core and memory must not be negative")
        if slot.core_milli > MILLI:
            raise LedgerError(f"a slot asks {slot.core_milli} milli, more than one GPU")
        amounts = per.setdefault(slot.gpu, [0, 0])
        amounts[0] += slot.core_milli
        amounts[1] += slot.memory_mib
    return per


def placement_from_assignment(
    assignment: Assignment, inventory: NodeInventory, cpu_milli: int = 0, memory_bytes: int = 0
) -> Placement:
    """The ledger placement of an assignment; raises LedgerError for a GPU the node lacks."""
    positions = {gpu.uuid: i for i, gpu in enumerate(inventory.gpus)}
    slots = []
    for share in assignment.shares():
        uuid = share.parent_uuid or share.uuid
        if uuid not in positions:
            raise LedgerError(f"node {inventory.node!r} has no GPU {uuid}")
        slots.append(Slot(positions[uuid], share.core_milli, share.memory_mib, share.mig_profile, share.mig_start))
    return Placement(assignment.node, cpu_milli, memory_bytes, tuple(slots))


def shares_for(placement_slots: Iterable[Slot], inventory: NodeInventory) -> tuple[GpuShare, ...]:
    """Assignment shares (with UUIDs and indexes) for slots on a node. A MIG slot names its GPU as
    the parent; its own UUID is the existing instance's (static mode) or empty until the runtime
    creates it (dynamic mode)."""
    out = []
    for slot in placement_slots:
        gpu = inventory.gpus[slot.gpu]
        if slot.is_mig:
            existing = next(
                (d.uuid for d in gpu.mig_devices if d.start == slot.mig_start and d.profile == slot.mig_profile), ""
            )
            out.append(
                GpuShare(GpuUUID(existing), gpu.index, 0, slot.memory_mib, slot.mig_profile, gpu.uuid, slot.mig_start)
            )
        else:
            out.append(GpuShare(gpu.uuid, gpu.index, slot.core_milli, slot.memory_mib))
    return tuple(out)
