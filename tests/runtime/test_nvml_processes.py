"""The NVML backend's process readings and their attribution to containers, on a patched pynvml whose
functions return the real structures (`c_nvmlProcessInfo_v3_t` through nvidia-ml-py's own converter,
`c_nvmlProcessUtilizationInfo_v1_t`, `c_nvmlProcessUtilizationSample_t`) and raise its NVMLError codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pynvml
import pytest

from runtime.nvml_fakes import MIB, FakeGpu, FakeNvml, err
from runtimekit.kube.objects import Pod, PodStatus
from runtimekit.model import GpuUUID
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.attribution import AttributedUsage
from runtimekit.runtime.nvml import NvmlBackend
from runtimekit.runtime.usage import GpuProcess, remainders

UNSUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED


def proc(pid: int, mib: int) -> Any:
    return pynvml.nvmlStructToFriendlyObject(
        pynvml.c_nvmlProcessInfo_v3_t(pid=pid, usedGpuMemory=mib * MIB, gpuInstanceId=0xFFFFFFFF)
    )


class ProcessNvml(FakeNvml):
    """FakeNvml plus processes and per-process utilisation per GPU (or MIG device) UUID."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> None:
        self.compute: dict[str, list[Any]] = {}
        self.graphics: dict[str, list[Any]] = {}
        self.mps: dict[str, list[Any] | int] = {}  # MPS clients, or an NVML error code to raise
        self.info: dict[str, list[Any] | int] = {}  # samples, or an NVML error code to raise
        self.legacy: dict[str, list[Any] | int] = {}
        self.asked: list[tuple[str, str, int]] = []
        super().__init__(monkeypatch, gpus)

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return self.compute.get(h.uuid, [])

    def nvmlDeviceGetMPSComputeRunningProcesses(self, h: Any) -> list[Any]:
        found = self.mps.get(h.uuid, [])
        if isinstance(found, int):
            raise err(found)
        return found

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list[Any]:
        if h.uuid not in self.graphics:
            raise err(UNSUPPORTED)
        return self.graphics[h.uuid]

    def _answer(self, table: dict[str, list[Any] | int], name: str, h: Any, since: int) -> list[Any]:
        self.asked.append((name, h.uuid, since))
        found = table.get(h.uuid, UNSUPPORTED)
        if isinstance(found, int):
            raise err(found)
        return found

    def nvmlDeviceGetProcessesUtilizationInfo(self, h: Any, since: int) -> list[Any]:
        return self._answer(self.info, "info", h, since)

    def nvmlDeviceGetProcessUtilization(self, h: Any, since: int) -> list[Any]:
        return self._answer(self.legacy, "legacy", h, since)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> ProcessNvml:
    gpus = [FakeGpu(0, "NVIDIA H200", 143771), FakeGpu(1, "NVIDIA A100-SXM4-80GB", 81920, mig=True)]
    gpus.append(FakeGpu(2, "Tesla T4", 15360, ecc=False))
    return ProcessNvml(monkeypatch, gpus)


def backend() -> NvmlBackend:
    b = NvmlBackend(event_timeout_ms=20, clock=lambda: 3.0)
    b.open()
    return b


def util(pid: int, stamp: int, sm: int) -> Any:
    return pynvml.c_nvmlProcessUtilizationInfo_v1_t(timeStamp=stamp, pid=pid, smUtil=sm, memUtil=1)


def test_processes_memory_utilization_and_mig(fake: ProcessNvml) -> None:
    h200, a100, t4 = (g.uuid for g in fake.gpus)
    fake.compute[h200] = [proc(100, 4096), proc(101, 1024)]
    fake.graphics[h200] = [proc(100, 4096)]  # in both lists: counted once
    fake.info[h200] = [util(100, 10, 10), util(100, 20, 30), util(101, 15, 20)]
    fake.compute["MIG-1-0"] = [proc(200, 2048)]
    fake.compute[t4] = [proc(300, 512)]
    fake.legacy[t4] = [pynvml.c_nvmlProcessUtilizationSample_t(pid=300, timeStamp=5, smUtil=55)]
    got = backend().processes()
    assert got == [
        GpuProcess(100, GpuUUID(h200), h200, 4096, 30.0),  # the newest sample of the PID
        GpuProcess(101, GpuUUID(h200), h200, 1024, 20.0),
        GpuProcess(200, GpuUUID(a100), "MIG-1-0", 2048, None),  # MIG: on its MIG device, no per-process SM
        GpuProcess(300, GpuUUID(t4), t4, 512, 55.0),  # the older call where the newer is not supported
    ]
    assert ("info", h200, 0) in fake.asked
    assert ("legacy", t4, 0) in fake.asked


def test_mps_clients_are_read_beside_their_server(fake: ProcessNvml) -> None:
    """Under MPS the compute list holds the server; each client, with its own memory, is in the MPS list."""
    h200, _, t4 = (g.uuid for g in fake.gpus)
    fake.compute[h200] = [proc(50, 400)]  # nvidia-cuda-mps-server
    fake.mps[h200] = [proc(100, 4096), proc(101, 2048), proc(50, 300)]
    fake.info[h200] = [util(100, 1, 30), util(101, 1, 60)]
    fake.compute[t4] = [proc(300, 512)]
    fake.mps[t4] = pynvml.NVML_ERROR_NOT_SUPPORTED  # a driver without the MPS list: skipped
    got = {(p.gpu_uuid, p.pid): (p.memory_mib, p.sm_percent) for p in backend().processes()}
    assert got == {
        (h200, 50): (400, 0.0),  # in both lists: once, with its largest reading
        (h200, 100): (4096, 30.0),
        (h200, 101): (2048, 60.0),
        (t4, 300): (512, None),
    }


def test_next_interval_asks_from_the_last_seen_sample(fake: ProcessNvml) -> None:
    h200 = fake.gpus[0].uuid
    fake.compute[h200] = [proc(100, 4096)]
    fake.info[h200] = [util(100, 20, 30)]
    b = backend()
    b.processes()
    fake.info[h200] = pynvml.NVML_ERROR_NOT_FOUND  # no sample since: the process was idle
    assert b.processes()[0].sm_percent == 0.0
    assert ("info", h200, 20) in fake.asked


def test_no_per_process_utilisation_is_unknown_and_not_asked_again(fake: ProcessNvml) -> None:
    t4 = fake.gpus[2].uuid
    fake.compute[t4] = [proc(300, 512)]
    b = backend()
    assert b.processes()[-1] == GpuProcess(300, GpuUUID(t4), t4, 512, None)
    before = len(fake.asked)
    b.processes()
    assert [a for a in fake.asked[before:] if a[1] == t4] == []


def test_attribution_to_containers_and_remainder(fake: ProcessNvml, tmp_path: Path) -> None:
    h200 = fake.gpus[0].uuid
    uid = "74c13223-5a00-11e9-b385-42010a80018d"
    cid = "a" * 64
    fake.compute[h200] = [proc(100, 4096), proc(101, 1024), proc(102, 700)]
    fake.info[h200] = [util(100, 1, 30), util(101, 1, 20), util(102, 1, 5)]
    for pid, path in ((100, f"/kubepods/burstable/pod{uid}/{cid}"), (101, f"/kubepods/burstable/pod{uid}/{cid}")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(f"0::{path}\n")
    (tmp_path / "102").mkdir()
    (tmp_path / "102" / "cgroup").write_text("0::/system.slice/xorg.service\n")  # not a container
    status: PodStatus = {"containerStatuses": [{"name": "main", "containerID": f"containerd://{cid}"}]}
    pod: Pod = {"metadata": {"uid": uid}, "status": status}
    allocations = [
        Allocation(PodRef("ml", "train", uid), "main", (Grant(h200, 0, 300, 4096),), 0),
        Allocation(PodRef("ml", "idle", "uid-2"), "main", (Grant(h200, 0, 200, 2048),), 0),
    ]
    found = AttributedUsage(backend(), tmp_path).containers(allocations, {uid: pod})
    train, idle = found
    assert (train.memory_used_mib, train.sm_percent, train.pids) == (5120, 50.0, (100, 101))
    assert train.over_memory
    assert train.over_core
    assert (idle.memory_used_mib, idle.sm_percent, idle.over_share) == (0, None, False)
    rest = remainders({GpuUUID(h200): (6000, 60.0)}, found)
    assert (rest[0].memory_mib, rest[0].sm_percent) == (880, 10.0)


def test_mig_processes_count_for_the_container_granted_that_mig_device(fake: ProcessNvml, tmp_path: Path) -> None:
    a100 = fake.gpus[1].uuid
    uid = "0b0c8a4e-1111-4222-8333-444455556666"
    fake.compute["MIG-1-0"] = [proc(200, 2048)]
    fake.compute["MIG-1-1"] = [proc(201, 512)]  # the same pod's process, on a MIG device it was not granted
    for pid in (200, 201):
        (tmp_path / str(pid)).mkdir()
        path = f"/kubepods.slice/kubepods-pod{uid.replace('-', '_')}.slice/cri-containerd-{'b' * 64}.scope"
        (tmp_path / str(pid) / "cgroup").write_text(f"0::{path}\n")
    grant = Grant("MIG-1-0", 1, 1000, 72448, parent_uuid=a100, mig_profile="3g.71gb", mig_start=0)
    found = AttributedUsage(backend(), tmp_path).containers(
        [Allocation(PodRef("ml", "mig", uid), "main", (grant,), 0)], {}
    )
    assert [(u.gpu_uuid, u.device_uuid, u.memory_used_mib, u.sm_percent, u.pids) for u in found] == [
        (GpuUUID(a100), "MIG-1-0", 2048, None, (200,))
    ]
