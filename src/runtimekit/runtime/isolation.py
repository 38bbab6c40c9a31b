"""Isolation backends: what a container gets (env, mounts, device nodes, CDI names) for its grants.

Every backend makes the granted GPUs visible: `NVIDIA_VISIBLE_DEVICES` (UUIDs, in the order of the
container's device ordinals), CDI names `nvidia.com/gpu=<uuid>` and the `/dev/nvidia*` nodes; a MIG
device is its `MIG-…` UUID, its GPU's node and its `/dev/nvidia-caps` nodes, and is isolated by the
hardware, so the limits below apply to the container's GPU shares only (none when it has only MIG
devices). Then:
- `mps`: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (the smallest compute share, in percent, at least 1; 100
  when the shares name no compute, memory-only),
  `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (`0=<N>M,1=<N>M`, MiB per ordinal as the container sees it),
  `CUDA_MPS_PIPE_DIRECTORY` and a mount of the host pipe folder (protocols.md §5.1), and the MPS daemon's
  shared memory at `/dev/shm` (MPS clients talk to its server through it, so a container with a
  `/dev/shm` of its own cannot connect; NVIDIA's device plugin mounts its MPS daemon's the same way);
- `hami-core`: `CUDA_DEVICE_MEMORY_LIMIT_<i>=<N>m` per ordinal and `CUDA_DEVICE_SM_LIMIT` (percent;
  0, HAMi-core's "no limit", when the shares name no compute, as HAMi's device plugin writes a pod's
  `gpucores` of 0), with HAMi-core's library mounted and preloaded; as HAMi's device plugin does, the
  container's `/usr/local/vgpu` is a host folder of its own, `<lib dir>/containers/<pod uid>_<container>`
  (`host_folders`, which the runtime makes), holding HAMi-core's shared region
  (`CUDA_DEVICE_MEMORY_SHARED_CACHE`), where node tools such as HAMi's monitor read the container's use; and
  `CUDA_OVERSUBSCRIBE=true` when the GPUs offer more memory than they have (`rules.memoryScaling` above
  1, HAMi's deviceMemoryScaling), so HAMi-core lets the excess spill to host memory as HAMi's does;
- `none`: visibility only.
Pure: no I/O. Callers: the runtime service's Allocate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from runtimekit.runtime.allocations import Grant
from runtimekit.runtime.backend import DeviceInfo

CDI_KIND = "nvidia.com/gpu"
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
DEFAULT_MPS_PIPE_DIR = "/run/lj-runtimekit/mps/pipe"
DEFAULT_MPS_LOG_DIR = "/run/lj-runtimekit/mps/log"
DEFAULT_MPS_SHM_DIR = "/dev/shm"  # the daemon's own /dev/shm: the host's where the runtime runs with hostIPC
DEFAULT_HAMI_LIB_DIR = "/usr/local/vgpu"
HAMI_LIBRARY = "libvgpu.so"
MPS_UNLIMITED = 100  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of all of the GPU's threads
HAMI_CORE_UNLIMITED = 0  # HAMi-core reads CUDA_DEVICE_SM_LIMIT 0 (or unset) as no compute limit


@dataclass(frozen=True)
class MountSpec:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceNodeSpec:
    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class ContainerEdits:
    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[MountSpec, ...] = ()
    devices: tuple[DeviceNodeSpec, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)


class Isolation(Protocol):
    """Turns a container's grants into container edits."""

    @property
    def name(self) -> str: ...

    def edits(self, grants: Sequence[Grant], devices: Mapping[str, DeviceInfo], owner: str = "") -> ContainerEdits:
        """Edits for grants (ordered as the container's device ordinals); `devices` maps GPU UUIDs; `owner`
        names the container on the node (`owner_name`), "" where there is none."""
        ...

    def host_folders(self, grants: Sequence[Grant], owner: str) -> tuple[str, ...]:
        """Host folders the container's edits mount that the runtime must make first (and may remove
        once the container's allocation is released)."""
        ...


def owner_name(pod_uid: str, container: str) -> str:
    """A container's name on the node, as HAMi names its per-container folders: `<pod uid>_<container>`."""
    return f"{pod_uid}_{container}"


def visibility(grants: Sequence[Grant], devices: Mapping[str, DeviceInfo]) -> ContainerEdits:
    """What every backend returns: the granted GPUs (or MIG devices) and their device nodes."""
    uuids = [g.uuid for g in grants]
    minors = sorted({devices[g.gpu_uuid].minor for g in grants})
    nodes = tuple(DeviceNodeSpec(f"/dev/nvidia{m}", f"/dev/nvidia{m}") for m in minors)
    nodes += tuple(DeviceNodeSpec(path, path) for path in CONTROL_DEVICES)
    caps = [
        path
        for g in grants
        if g.is_mig
        for m in devices[g.gpu_uuid].mig_devices
        if m.uuid == g.uuid
        for path in m.cap_paths
    ]
    nodes += tuple(DeviceNodeSpec(path, path) for path in dict.fromkeys(caps))
    return ContainerEdits(
        envs={"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)},
        devices=nodes,
        cdi_devices=tuple(f"{CDI_KIND}={u}" for u in uuids),
    )


def percent(core_milli: int) -> int:
    """A compute share in whole percent, at least 1 (a tiny share must not read as no limit)."""
    return max(1, min(100, core_milli // 10))


def compute_limit(shares: Sequence[tuple[int, Grant]], unlimited: int) -> int:
    """The compute limit of a container's shares: the smallest named share in percent, or `unlimited`
    when none names compute (a memory-only share). Capping such a share at 1 % would run its work at a
    hundredth of the card, while HAMi runs it unlimited (its device plugin writes `gpucores` 0 as is)."""
    named = [percent(g.core_milli) for _, g in shares if g.core_milli > 0]
    return min(named) if named else unlimited


def _memory_mib(grant: Grant, devices: Mapping[str, DeviceInfo]) -> int:
    """The memory limit of a grant: what was granted, or the whole GPU when no memory was named."""
    return grant.memory_mib or devices[grant.gpu_uuid].memory_mib


def _with(base: ContainerEdits, envs: Mapping[str, str], mounts: tuple[MountSpec, ...] = ()) -> ContainerEdits:
    return ContainerEdits({**base.envs, **envs}, base.mounts + mounts, base.devices, base.cdi_devices, base.annotations)


class NoIsolation:
    name = "none"

    def edits(self, grants: Sequence[Grant], devices: Mapping[str, DeviceInfo], owner: str = "") -> ContainerEdits:
        return visibility(grants, devices)

    def host_folders(self, grants: Sequence[Grant], owner: str) -> tuple[str, ...]:
        return ()


def _shares(grants: Sequence[Grant]) -> list[tuple[int, Grant]]:
    """(device ordinal, grant) of the GPU shares (not MIG devices) among a container's grants."""
    return [(i, g) for i, g in enumerate(grants) if not g.is_mig]


class MpsIsolation:
    name = "mps"

    def __init__(self, pipe_dir: str = DEFAULT_MPS_PIPE_DIR, shm_dir: str = DEFAULT_MPS_SHM_DIR) -> None:
        self.pipe_dir = pipe_dir
        self.shm_dir = shm_dir

    def host_folders(self, grants: Sequence[Grant], owner: str) -> tuple[str, ...]:
        return ()

    def edits(self, grants: Sequence[Grant], devices: Mapping[str, DeviceInfo], owner: str = "") -> ContainerEdits:
        shares = _shares(grants)
        if not shares:
            return visibility(grants, devices)
        limits = ",".join(f"{i}={_memory_mib(g, devices)}M" for i, g in shares)
        envs = {
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(compute_limit(shares, MPS_UNLIMITED)),
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": limits,
            "CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir,
        }
        mounts = (MountSpec(self.pipe_dir, self.pipe_dir), MountSpec("/dev/shm", self.shm_dir))
        return _with(visibility(grants, devices), envs, mounts)


class HamiCoreIsolation:
    name = "hami-core"

    def __init__(self, lib_dir: str = DEFAULT_HAMI_LIB_DIR, oversubscribe: bool = False) -> None:
        self.lib_dir = lib_dir
        self.oversubscribe = oversubscribe

    def host_folders(self, grants: Sequence[Grant], owner: str) -> tuple[str, ...]:
        return (f"{self.lib_dir}/containers/{owner}",) if owner and _shares(grants) else ()

    def edits(self, grants: Sequence[Grant], devices: Mapping[str, DeviceInfo], owner: str = "") -> ContainerEdits:
        shares = _shares(grants)
        if not shares:
            return visibility(grants, devices)
        envs = {f"CUDA_DEVICE_MEMORY_LIMIT_{i}": f"{_memory_mib(g, devices)}m" for i, g in shares}
        envs["CUDA_DEVICE_SM_LIMIT"] = str(compute_limit(shares, HAMI_CORE_UNLIMITED))
        envs["LD_PRELOAD"] = f"{DEFAULT_HAMI_LIB_DIR}/{HAMI_LIBRARY}"
        if self.oversubscribe:
            envs["CUDA_OVERSUBSCRIBE"] = "true"
        if not owner:
            return _with(visibility(grants, devices), envs, (MountSpec(DEFAULT_HAMI_LIB_DIR, self.lib_dir, True),))
        envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = f"{DEFAULT_HAMI_LIB_DIR}/{owner}.cache"
        (folder,) = self.host_folders(grants, owner)
        mounts = (  # the folder first: the library is mounted into it
            MountSpec(DEFAULT_HAMI_LIB_DIR, folder),
            MountSpec(f"{DEFAULT_HAMI_LIB_DIR}/{HAMI_LIBRARY}", f"{self.lib_dir}/{HAMI_LIBRARY}", read_only=True),
        )
        return _with(visibility(grants, devices), envs, mounts)


ISOLATIONS = ("mps", "hami-core", "none")


def make_isolation(
    name: str,
    mps_pipe_dir: str = DEFAULT_MPS_PIPE_DIR,
    hami_lib_dir: str = DEFAULT_HAMI_LIB_DIR,
    memory_scaling: float = 1.0,
    mps_shm_dir: str = DEFAULT_MPS_SHM_DIR,
) -> Isolation:
    """The isolation backend called `name`; ValueError lists the known ones. `memory_scaling` is the
    protocol's `rules.memoryScaling`: above 1, memory is oversubscribed. `mps_shm_dir`: the host folder
    that is the MPS daemon's `/dev/shm`."""
    if name == "mps":
        return MpsIsolation(mps_pipe_dir, mps_shm_dir)
    if name == "hami-core":
        return HamiCoreIsolation(hami_lib_dir, oversubscribe=memory_scaling > 1)
    if name == "none":
        return NoIsolation()
    raise ValueError(f"unknown isolation {name!r}; choose one of {', '.join(ISOLATIONS)}")
