"""HAMi-core's per-container folder, as HAMi's device plugin (server.go's Allocate) sets it up: the
container's `/usr/local/vgpu` is a host folder of its own, `<lib dir>/containers/<pod uid>_<container>`,
made open to any user before the container starts, with the library mounted into it read-only and
HAMi-core's shared region (`CUDA_DEVICE_MEMORY_SHARED_CACHE`) in it, where node tools such as HAMi's
monitor read the container's use. The runtime makes the folder at Allocate and removes it at Release."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from runtime_helpers import NODE, RuntimeFactory

from runtimekit.api.runtime_client import Share
from runtimekit.base.rpcerrors import Code, ServiceError
from runtimekit.model import simulated_uuid
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.values import AllocateInput

GPU0 = simulated_uuid(NODE, 0)
UID = "74c13223-5a00-11e9-b385-42010a80018d"


def ask(uid: str = UID, container: str = "main", share: tuple[str, int, int] = (GPU0, 300, 4096)) -> AllocateInput:
    return AllocateInput(PodRef("ml", "train", uid), container, (Share(*share),))


def test_each_container_gets_a_folder_of_its_own(make_runtime: RuntimeFactory, short_dir: Path) -> None:
    runtime = make_runtime(isolation="hami-core")
    lib = short_dir / "vgpu"
    edits = runtime.allocate(ask()).edits
    folder = lib / "containers" / f"{UID}_main"
    assert folder.is_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777  # whatever user the container runs as writes there
    assert edits.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == f"/usr/local/vgpu/{UID}_main.cache"
    assert edits.envs["LD_PRELOAD"] == "/usr/local/vgpu/libvgpu.so"
    assert [(m.container_path, m.host_path, m.read_only) for m in edits.mounts] == [
        ("/usr/local/vgpu", str(folder), False),
        ("/usr/local/vgpu/libvgpu.so", f"{lib}/libvgpu.so", True),
    ]
    (folder / f"{UID}_main.cache").write_bytes(b"region")  # HAMi-core writes its region
    assert runtime.allocate(ask()).edits == edits  # a repeated Allocate keeps the folder and what is in it
    assert (folder / f"{UID}_main.cache").exists()
    runtime.allocate(ask(container="sidecar", share=(GPU0, 200, 1024)))
    assert (lib / "containers" / f"{UID}_sidecar").is_dir()
    runtime.release(UID, "main")
    assert not folder.exists()
    assert (lib / "containers" / f"{UID}_sidecar").is_dir()  # the other container's stays


def test_a_folder_that_cannot_be_made_refuses_the_allocation_and_books_nothing(
    make_runtime: RuntimeFactory, short_dir: Path
) -> None:
    (short_dir / "vgpu").write_text("not a folder")
    runtime = make_runtime(isolation="hami-core")
    with pytest.raises(ServiceError) as exc:
        runtime.allocate(ask())
    assert exc.value.code is Code.UNAVAILABLE
    assert "cannot make the container's folder" in exc.value.message
    assert runtime.allocations() == []


def test_other_isolations_make_no_folder(make_runtime: RuntimeFactory, short_dir: Path) -> None:
    make_runtime(isolation="mps").allocate(ask())
    assert not (short_dir / "vgpu").exists()
