"""The runtime's dynamic MIG devices: made for a container at Allocate, destroyed at Release, never leaked.

`MigDevices` turns the placeholder grants of dynamic MIG shares (GPU, profile, start; no UUID yet)
into MIG devices through the backend's `MigControl`:
- a device that already sits at the wanted place and that no container holds is adopted (Allocate
  repeated after a crash between making it and writing the checkpoint); one held by another
  container is RESOURCE_EXHAUSTED;
- otherwise the backend makes it under the rules of `runtimekit.runtime.mig.placement_problem`:
  INVALID_ARGUMENT for a profile or start the GPU cannot have, FAILED_PRECONDITION for slices that
  overlap an existing device or a GPU not in dynamic MIG mode (and for anything else the driver
  refuses);
- all or nothing: when one of a container's devices fails, the ones just made are destroyed again.
`destroy` destroys the devices of released grants (a device still in use is reported and left to
`collect`). `collect` destroys every device of a dynamic GPU that no allocation holds: on a GPU in
dynamic MIG mode the runtime owns every MIG device, so what a crash or a failed destroy left behind
goes at the next start or reconciliation. Not thread-safe: the service calls it under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import GpuUUID, MigMode
from runtimekit.runtime.allocations import Grant, order_grants
from runtimekit.runtime.backend import DeviceInfo, MigControl, MigError, MigFailure

log = logging.getLogger(__name__)

Holder = Callable[[str], tuple[str, str] | None]  # MIG UUID -> (pod uid, container) holding it
Made = tuple[str, str]  # (GPU UUID, MIG UUID) of a device made in this call

CODES = {
    MigFailure.INVALID: Code.INVALID_ARGUMENT,
    MigFailure.CONFLICT: Code.FAILED_PRECONDITION,
    MigFailure.IN_USE: Code.FAILED_PRECONDITION,
    MigFailure.FAILED: Code.FAILED_PRECONDITION,
}


class MigDevices:
    """See the module docstring. `devices` reads the backend's current GPUs (with their MIG devices)."""

    def __init__(self, control: MigControl | None, devices: Callable[[], Sequence[DeviceInfo]]) -> None:
        self._control = control
        self._devices = devices

    def _gpu(self, uuid: str) -> DeviceInfo:
        found = next((d for d in self._devices() if d.uuid == uuid), None)
        if found is None:
            raise ServiceError(Code.NOT_FOUND, f"this node has no GPU {uuid!r}")
        return found

    def materialise(self, grants: Sequence[Grant], holder: Holder) -> tuple[tuple[Grant, ...], list[Made]]:
        """The grants with every dynamic placeholder made (or adopted), and what was made. Raises
        ServiceError after destroying what it made."""
        made: list[Made] = []
        out: list[Grant] = []
        try:
            for grant in grants:
                out.append(self._make(grant, holder, made) if grant.mig_dynamic and not grant.uuid else grant)
        except ServiceError:
            self.undo(made)
            raise
        return order_grants(out), made

    def _make(self, grant: Grant, holder: Holder, made: list[Made]) -> Grant:
        gpu = self._gpu(grant.gpu_uuid)
        there = next((m for m in gpu.mig_devices if (m.profile, m.start) == (grant.mig_profile, grant.mig_start)), None)
        if there is not None:
            who = holder(there.uuid)
            if who is not None or any(uuid == there.uuid for _, uuid in made):
                by = f"pod uid {who[0]} container {who[1]}" if who else "this container already"
                raise ServiceError(
                    Code.RESOURCE_EXHAUSTED,
                    f"the {there.profile} MIG device {there.uuid} at slice {there.start} of GPU {gpu.index} is held "
                    f"by {by}",
                )
            log.info(
                "adopting MIG device %s (%s at slice %d) of GPU %d", there.uuid, there.profile, there.start, gpu.index
            )
            return replace(grant, uuid=there.uuid, memory_mib=there.memory_mib)
        if self._control is None:
            raise ServiceError(Code.FAILED_PRECONDITION, "this runtime's backend cannot make MIG devices")
        try:
            device = self._control.create_mig_device(GpuUUID(gpu.uuid), grant.mig_profile, grant.mig_start)
        except MigError as exc:
            raise ServiceError(CODES[exc.failure], exc.message) from None
        made.append((gpu.uuid, device.uuid))
        log.info("made MIG device %s (%s at slice %d) on GPU %d", device.uuid, device.profile, device.start, gpu.index)
        return replace(grant, uuid=device.uuid, memory_mib=device.memory_mib)

    def undo(self, made: Iterable[Made]) -> None:
        """Destroy devices made for an allocation that did not happen (best effort; `collect` retries)."""
        for gpu, uuid in made:
            self._destroy(gpu, uuid)

    def destroy(self, grants: Iterable[Grant]) -> list[str]:
        """Destroy the devices of released dynamic grants; returns what could not be destroyed, why."""
        problems = []
        for grant in grants:
            if grant.mig_dynamic and grant.uuid:
                problem = self._destroy(grant.gpu_uuid, grant.uuid)
                if problem:
                    problems.append(problem)
        return problems

    def _destroy(self, gpu: str, uuid: str) -> str:
        if self._control is None:
            return f"MIG device {uuid}: this backend cannot destroy MIG devices"
        try:
            self._control.destroy_mig_device(GpuUUID(gpu), uuid)
        except MigError as exc:
            log.warning("MIG device %s not destroyed (retried at the next reconciliation): %s", uuid, exc.message)
            return f"MIG device {uuid}: {exc.message}"
        return ""

    def collect(self, held: set[str]) -> list[str]:
        """Destroy every MIG device of a dynamic GPU that no allocation holds; returns the UUIDs destroyed."""
        destroyed = []
        for gpu in self._devices():
            if gpu.mig_mode is not MigMode.DYNAMIC:
                continue
            for mig in gpu.mig_devices:
                if mig.uuid not in held and not self._destroy(gpu.uuid, mig.uuid):
                    log.info("destroyed MIG device %s of GPU %d: no allocation holds it", mig.uuid, gpu.index)
                    destroyed.append(mig.uuid)
        return destroyed
