"""What each isolation backend puts in a container, as tables."""

from __future__ import annotations

import pytest

from runtimekit.model import GpuUUID, MigMode
from runtimekit.runtime.allocations import Grant
from runtimekit.runtime.backend import DeviceInfo
from runtimekit.runtime.isolation import ContainerEdits, make_isolation, owner_name

DEVICES = {
    f"GPU-{i}": DeviceInfo(i, GpuUUID(f"GPU-{i}"), "H200", "NVIDIA H200", 143771, minor=i, mig_mode=MigMode.OFF)
    for i in range(3)
}
SHARE = (Grant("GPU-1", 1, 300, 8192),)
TWO = (Grant("GPU-0", 0, 500, 4096), Grant("GPU-2", 2, 250, 2048))
WHOLE = (Grant("GPU-2", 2, 1000, 143771),)
NO_MEMORY = (Grant("GPU-0", 0, 5, 0),)
MEMORY_ONLY = (Grant("GPU-1", 1, 0, 8192),)  # HAMi's `gpumem: 8192` without `gpucores`


def edits(isolation: str, grants: tuple[Grant, ...]) -> ContainerEdits:
    return make_isolation(isolation, mps_pipe_dir="/run/mps", hami_lib_dir="/opt/vgpu").edits(grants, DEVICES)


@pytest.mark.parametrize(
    ("isolation", "grants", "expected"),
    [
        pytest.param("none", SHARE, {"NVIDIA_VISIBLE_DEVICES": "GPU-1"}, id="none"),
        pytest.param(
            "mps",
            SHARE,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-1",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8192M",
                "CUDA_MPS_PIPE_DIRECTORY": "/run/mps",
            },
            id="mps-share",
        ),
        pytest.param(
            "mps",
            TWO,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-0,GPU-2",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M,1=2048M",
                "CUDA_MPS_PIPE_DIRECTORY": "/run/mps",
            },
            id="mps-two-gpus-ordinals-as-the-container-sees-them",
        ),
        pytest.param(
            "mps",
            NO_MEMORY,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-0",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "1",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=143771M",
                "CUDA_MPS_PIPE_DIRECTORY": "/run/mps",
            },
            id="mps-tiny-share-no-memory",
        ),
        pytest.param(
            "hami-core",
            TWO,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-0,GPU-2",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m",
                "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m",
                "CUDA_DEVICE_SM_LIMIT": "25",
                "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
            },
            id="hami-core-two-gpus",
        ),
        pytest.param(
            "hami-core",
            WHOLE,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-2",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "143771m",
                "CUDA_DEVICE_SM_LIMIT": "100",
                "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
            },
            id="hami-core-whole",
        ),
        # HAMi's device plugin writes a pod's gpucores as is, 0 when none is given, and HAMi-core reads
        # CUDA_DEVICE_SM_LIMIT 0 as no limit: a memory-only share must not be throttled to 1 % of the card
        pytest.param(
            "hami-core",
            MEMORY_ONLY,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-1",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "8192m",
                "CUDA_DEVICE_SM_LIMIT": "0",
                "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
            },
            id="hami-core-memory-only-no-compute-limit",
        ),
        pytest.param(
            "hami-core",
            NO_MEMORY,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-0",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "143771m",
                "CUDA_DEVICE_SM_LIMIT": "1",
                "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
            },
            id="hami-core-tiny-share-is-limited-not-unlimited",
        ),
        pytest.param(
            "mps",
            MEMORY_ONLY,
            {
                "NVIDIA_VISIBLE_DEVICES": "GPU-1",
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8192M",
                "CUDA_MPS_PIPE_DIRECTORY": "/run/mps",
            },
            id="mps-memory-only-all-threads",
        ),
    ],
)
def test_env_per_backend(isolation: str, grants: tuple[Grant, ...], expected: dict[str, str]) -> None:
    assert dict(edits(isolation, grants).envs) == expected


@pytest.mark.parametrize("isolation", ["none", "mps", "hami-core"])
def test_every_backend_returns_cdi_names_and_device_nodes(isolation: str) -> None:
    result = edits(isolation, TWO)
    assert result.cdi_devices == ("nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-2")
    assert [d.host_path for d in result.devices] == [
        "/dev/nvidia0",
        "/dev/nvidia2",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    ]
    assert {d.permissions for d in result.devices} == {"rw"}


@pytest.mark.parametrize(
    ("isolation", "mounts"),
    [
        ("none", []),
        # the MPS daemon's shared memory too: its clients talk to its server through /dev/shm
        ("mps", [("/run/mps", "/run/mps", False), ("/dev/shm", "/dev/shm", False)]),
        ("hami-core", [("/usr/local/vgpu", "/opt/vgpu", True)]),
    ],
)
def test_mounts_per_backend(isolation: str, mounts: list[tuple[str, str, bool]]) -> None:
    assert [(m.container_path, m.host_path, m.read_only) for m in edits(isolation, SHARE).mounts] == mounts


def test_the_mps_daemons_shared_memory_can_be_a_folder_of_its_own() -> None:
    """As NVIDIA's MPS daemon runs with a tmpfs of its own as /dev/shm, so that GPU containers do not
    share the host's: the container's /dev/shm is then that folder."""
    isolation = make_isolation("mps", mps_pipe_dir="/run/mps", mps_shm_dir="/run/lj-runtimekit/mps/shm")
    (shm,) = [m for m in isolation.edits(SHARE, DEVICES).mounts if m.container_path == "/dev/shm"]
    assert (shm.host_path, shm.read_only) == ("/run/lj-runtimekit/mps/shm", False)


def test_hami_core_names_each_containers_folder_as_hami_does() -> None:
    """With the container's name on the node, `/usr/local/vgpu` is its own folder of the library's host
    folder, holding HAMi-core's shared region; without one (no owner), the library folder as is."""
    isolation = make_isolation("hami-core", hami_lib_dir="/opt/vgpu")
    owner = owner_name("uid-1", "main")
    result = isolation.edits(SHARE, DEVICES, owner)
    assert owner == "uid-1_main"
    assert result.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == "/usr/local/vgpu/uid-1_main.cache"
    assert [(m.container_path, m.host_path, m.read_only) for m in result.mounts] == [
        ("/usr/local/vgpu", "/opt/vgpu/containers/uid-1_main", False),
        ("/usr/local/vgpu/libvgpu.so", "/opt/vgpu/libvgpu.so", True),
    ]
    assert isolation.host_folders(SHARE, owner) == ("/opt/vgpu/containers/uid-1_main",)
    assert isolation.host_folders(SHARE, "") == ()
    for other in ("mps", "none"):
        assert make_isolation(other).host_folders(SHARE, owner) == ()


def test_unknown_isolation_is_refused() -> None:
    with pytest.raises(ValueError, match="choose one of mps, hami-core, none"):
        make_isolation("cgpu")
