"""The MIG side of the ledger: per GPU in MIG mode, which memory slices are taken.

Static mode: the GPU's instances exist already (the node inventory lists them); a pod takes a free
instance of its profile. Dynamic mode: any valid placement whose slices are free can be made for a
pod (the runtime creates the instance at Allocate) and is destroyed when the pod leaves.
Callers: the node table (take, give, copy, `carry_over`, `mig_problem`), the scheduler's mig
plugin (options and scoring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtimekit.model.gpu import Gpu, MigMode, NodeInventory
from runtimekit.model.mig import MigGeometry, free_starts, geometry, mask
from runtimekit.model.placement import LedgerError, Placement


@dataclass
class MigGpuState:
    geometry: MigGeometry
    mode: MigMode
    instances: dict[int, str] = field(default_factory=dict)  # static mode: start -> profile of existing instances
    occupied: int = 0  # slices held by pods

    @classmethod
    def of(cls, gpu: Gpu) -> MigGpuState | None:
        geo = geometry(gpu.model)
        if gpu.mig_mode is MigMode.OFF or geo is None:
            return None
        return cls(geo, gpu.mig_mode, {d.start: d.profile for d in gpu.mig_devices})

    def copy(self) -> MigGpuState:
        return MigGpuState(self.geometry, self.mode, self.instances, self.occupied)

    def options(self, profile_name: str) -> list[int]:
        """Starts where a pod could get an instance of the profile now."""
        profile = self.geometry.profile(profile_name)
        if profile is None:
            return []
        if self.mode is MigMode.STATIC:
            return [
                s
                for s, p in sorted(self.instances.items())
                if p == profile_name and not self.occupied & mask(s, profile.size)
            ]
        return free_starts(self.geometry, profile, self.occupied)

    def check(self, profile_name: str, start: int) -> str | None:
        profile = self.geometry.profile(profile_name)
        if profile is None:
            return f"{self.geometry.model} has no MIG profile {profile_name!r}"
        if start not in profile.starts:
            return f"MIG profile {profile_name} cannot start at slice {start}"
        if self.mode is MigMode.STATIC and self.instances.get(start) != profile_name:
            return f"no {profile_name} instance at slice {start} in the static layout"
        if self.occupied & mask(start, profile.size):
            return f"MIG slices {start}-{start + profile.size - 1} are taken"
        return None

    def take(self, profile_name: str, start: int) -> None:
        profile = self.geometry.profile(profile_name)
        assert profile is not None
        self.occupied |= mask(start, profile.size)

    def give(self, profile_name: str, start: int) -> None:
        profile = self.geometry.profile(profile_name)
        if profile is not None:
            self.occupied &= ~mask(start, profile.size)


def carry_over(old: dict[int, MigGpuState], inventory: NodeInventory) -> dict[int, MigGpuState]:
    """MIG states for a node's GPUs in MIG mode, keeping the slices booked in `old` on GPUs that did
    not change mode or model. Raises LedgerError when booked slices would be lost."""
    states: dict[int, MigGpuState] = {}
    for col, gpu in enumerate(inventory.gpus):
        state = MigGpuState.of(gpu)
        previous = old.get(col)
        if previous is not None and previous.occupied:
            if state is None or state.geometry != previous.geometry or state.mode is not previous.mode:
                raise LedgerError(f"node {inventory.node!r}: GPU {col} changed MIG mode with slices booked")
            state.occupied = previous.occupied
        if state is not None:
            states[col] = state
    for col, previous in old.items():
        if col >= len(inventory.gpus) and previous.occupied:
            raise LedgerError(f"node {inventory.node!r}: GPU {col} is gone with MIG slices booked")
    return states


def mig_problem(states: dict[int, MigGpuState], placement: Placement) -> str | None:
    """Why the placement's MIG slots cannot be taken from `states` (the node's), or None."""
    migs = [s for s in placement.slots if s.is_mig]
    if not migs:
        return None
    trial = {g: st.copy() for g, st in states.items()}
    for slot in migs:
        state = trial.get(slot.gpu)
        if state is None:
            return f"GPU {slot.gpu} of {placement.node} is not in MIG mode"
        problem = state.check(slot.mig_profile, slot.mig_start)
        if problem:
            return f"GPU {slot.gpu} of {placement.node}: {problem}"
        state.take(slot.mig_profile, slot.mig_start)
    return None
