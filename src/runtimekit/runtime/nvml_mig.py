"""MIG through NVML (protocols.md §5.2): a GPU's profile table and valid placements, its MIG devices
with their start slices, and making and destroying GPU + compute instances.

Plain functions over the `pynvml` module (passed in, so tests patch its functions). Profiles come from
`nvmlDeviceGetGpuInstanceProfileInfo(h, i, version=2)` for every profile index (a profile the GPU
lacks raises an NVMLError and is skipped) with `nvmlDeviceGetGpuInstancePossiblePlacements`; only
plain `<g>g.<mem>gb` profiles are offered (the `+me`, `+gfx` and `-me` variants share slices with them
and no scheduler table knows them). Making an instance: `nvmlDeviceCreateGpuInstanceWithPlacement`,
then one compute instance spanning the whole GPU instance (rolled back if that fails). Destroying:
the compute instance first, then the GPU instance; NVML_ERROR_IN_USE becomes `MigFailure.IN_USE`.
Caller: `runtimekit.runtime.nvml.NvmlBackend`.
"""

from __future__ import annotations

import ctypes
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.model.mig import MigGeometry, MigProfile
from runtimekit.runtime.backend import MigDeviceInfo, MigError, MigFailure
from runtimekit.runtime.mig import cap_paths

log = logging.getLogger(__name__)

GI_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT of nvidia-ml-py 13
CI_PROFILE_FOR_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}  # NVML_COMPUTE_INSTANCE_PROFILE_<k>_SLICE
CI_ENGINE_SHARED = 0  # NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
MAX_PLACEMENTS = 32
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_FOUND = 6
ERROR_IN_USE = 19
ERROR_INSUFFICIENT_RESOURCES = 23
_PLAIN_PROFILE = re.compile(r"(?<![\w.+-])(\d+g\.\d+gb)(?![\w.+-])")
_ANY_PROFILE = re.compile(r"((?:\d+c\.)?\d+g\.\d+gb)")


def error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class MigTable:
    """A GPU's MIG profiles as NVML reports them, with NVML's profile ids."""

    geometry: MigGeometry
    profile_ids: Mapping[str, int]  # profile name -> NVML GPU-instance profile id

    def name_of(self, profile_id: int) -> str | None:
        return next((name for name, pid in self.profile_ids.items() if pid == profile_id), None)


def profile_name(info: Any) -> str | None:
    """The plain profile name of a GPU-instance profile info, or None for a variant (`+me`, ...)."""
    raw = _text(getattr(info, "name", b"")).strip()
    if raw:
        match = _PLAIN_PROFILE.search(raw)
        return match.group(1) if match else None
    return f"{int(info.sliceCount)}g.{math.ceil(int(info.memorySizeMB) / 1024)}gb"  # v1 info: no name


def possible_placements(nvml: Any, handle: Any, profile_id: int) -> list[tuple[int, int]]:
    """(start, size) of every placement NVML allows for the profile on the empty GPU."""
    array = (nvml.c_nvmlGpuInstancePlacement_t * MAX_PLACEMENTS)()
    count = ctypes.c_uint(MAX_PLACEMENTS)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.byref(count))
    return [(int(array[i].start), int(array[i].size)) for i in range(count.value)]


def read_table(nvml: Any, handle: Any, model: str) -> MigTable | None:
    """The GPU's MIG profiles; None when NVML answers for none (no MIG, or no permission)."""
    profiles: list[MigProfile] = []
    ids: dict[str, int] = {}
    for index in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", GI_PROFILE_COUNT))):
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index, version=2)
            name = profile_name(info)
            if not int(info.instanceCount) or name is None or name in ids:
                continue
            placements = possible_placements(nvml, handle, int(info.id))
        except Exception as exc:
            if error_code(exc) is None:
                raise
            continue  # NotSupported / InvalidArgument: a profile this GPU lacks
        if not placements:
            continue
        starts = tuple(sorted(start for start, _ in placements))
        profiles.append(MigProfile(name, int(info.sliceCount), int(info.memorySizeMB), placements[0][1], starts))
        ids[name] = int(info.id)
    if not profiles:
        return None
    slices = max(start + p.size for p in profiles for start in p.starts)
    return MigTable(MigGeometry(model, slices, tuple(profiles)), ids)


def _optional(read: Callable[..., Any], *args: Any) -> int | None:
    try:
        return int(read(*args))
    except Exception as exc:
        if error_code(exc) is None and not isinstance(exc, AttributeError):
            raise
        return None


def _placement(nvml: Any, handle: Any, gi_id: int, table: MigTable | None) -> tuple[str | None, int]:
    """(profile, start) of GPU instance `gi_id`; (None, -1) when NVML does not say."""
    try:
        info = nvml.nvmlGpuInstanceGetInfo(nvml.nvmlDeviceGetGpuInstanceById(handle, gi_id))
    except Exception as exc:
        if error_code(exc) is None and not isinstance(exc, AttributeError):
            raise
        return None, -1
    name = table.name_of(int(info.profileId)) if table is not None else None
    return name, int(info.placement.start)


def read_mig_devices(nvml: Any, handle: Any, table: MigTable | None, minor: int, dynamic: bool) -> list[MigDeviceInfo]:
    """The MIG devices of a GPU in MIG mode, with profile and start where NVML tells them."""
    out: list[MigDeviceInfo] = []
    for slot in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except Exception as exc:
            if error_code(exc) == ERROR_NOT_FOUND:
                continue  # an empty slot
            raise
        memory_mib = int(nvml.nvmlDeviceGetMemoryInfo(mig).total) >> 20
        gi = _optional(nvml.nvmlDeviceGetGpuInstanceId, mig)
        ci = _optional(nvml.nvmlDeviceGetComputeInstanceId, mig)
        profile, start = _placement(nvml, handle, gi, table) if gi is not None else (None, -1)
        if profile is None:
            match = _ANY_PROFILE.search(_text(nvml.nvmlDeviceGetName(mig)))
            profile = match.group(1) if match else f"{memory_mib // 1024}gb"
        out.append(
            MigDeviceInfo(
                uuid=_text(nvml.nvmlDeviceGetUUID(mig)),
                profile=profile,
                gpu_instance_id=gi or 0,
                compute_instance_id=ci or 0,
                memory_mib=memory_mib,
                start=start,
                dynamic=dynamic,
                cap_paths=cap_paths(minor, gi, ci or 0) if gi is not None else (),
            )
        )
    return sorted(out, key=lambda m: (m.start, m.uuid))


def _failure(exc: BaseException, doing: str) -> MigError:
    code = error_code(exc)
    if code == ERROR_IN_USE:
        return MigError(MigFailure.IN_USE, f"{doing}: in use (processes run on it): {exc}")
    if code == ERROR_INSUFFICIENT_RESOURCES:
        return MigError(MigFailure.CONFLICT, f"{doing}: the slices are taken: {exc}")
    if code == ERROR_INVALID_ARGUMENT:
        return MigError(MigFailure.INVALID, f"{doing}: NVML refuses the placement: {exc}")
    return MigError(MigFailure.FAILED, f"{doing}: {exc}")


def create(nvml: Any, handle: Any, table: MigTable, profile_name: str, start: int) -> int:
    """Make a GPU instance of the profile at `start` and one full compute instance in it; returns the
    GPU instance id. Raises MigError (the GPU instance is destroyed again if the compute one fails)."""
    profile = table.geometry.profile(profile_name)
    if profile is None or profile_name not in table.profile_ids:
        raise MigError(MigFailure.INVALID, f"NVML reports no MIG profile {profile_name!r} for this GPU")
    placement = nvml.c_nvmlGpuInstancePlacement_t()
    placement.start, placement.size = start, profile.size
    doing = f"making a {profile_name} GPU instance at slice {start}"
    try:
        gi = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
            handle, table.profile_ids[profile_name], ctypes.byref(placement)
        )
    except Exception as exc:
        if error_code(exc) is None:
            raise
        raise _failure(exc, doing) from None
    try:
        ci_profile = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, CI_PROFILE_FOR_SLICES[profile.compute_slices], CI_ENGINE_SHARED
        )
        nvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile.id)
        return int(nvml.nvmlGpuInstanceGetInfo(gi).id)
    except Exception as exc:
        if error_code(exc) is None and not isinstance(exc, KeyError):
            raise
        try:
            nvml.nvmlGpuInstanceDestroy(gi)
        except Exception as undo:  # report the first failure; the GPU instance is left for the operator
            log.error("could not destroy the GPU instance after a failed compute instance: %s", undo)
        raise _failure(exc, f"{doing}: the compute instance") from None


def destroy(nvml: Any, handle: Any, gi_id: int, ci_id: int) -> None:
    """Destroy compute instance `ci_id` of GPU instance `gi_id`, then the GPU instance. Raises MigError."""
    doing = f"destroying GPU instance {gi_id}"
    try:
        gi = nvml.nvmlDeviceGetGpuInstanceById(handle, gi_id)
    except Exception as exc:
        if error_code(exc) is None:
            raise
        raise _failure(exc, doing) from None
    try:
        nvml.nvmlComputeInstanceDestroy(nvml.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id))
    except Exception as exc:
        if error_code(exc) != ERROR_NOT_FOUND:  # already gone: go on with the GPU instance
            if error_code(exc) is None:
                raise
            raise _failure(exc, f"{doing}: compute instance {ci_id}") from None
    try:
        nvml.nvmlGpuInstanceDestroy(gi)
    except Exception as exc:
        if error_code(exc) is None:
            raise
        raise _failure(exc, doing) from None
