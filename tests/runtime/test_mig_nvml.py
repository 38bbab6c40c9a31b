"""The NVML backend's MIG code paths with `pynvml` functions patched (no GPU here): the profile table and
placements, instances with their starts, making (GPU instance with placement, then the compute
instance) and destroying (compute instance first) MIG devices, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml
import pytest
from nvml_fakes import FakeGpu, GpuInstance, MigNvml

from runtimekit.api.runtime_client import Share
from runtimekit.model import GpuUUID, MigMode
from runtimekit.model.mig import geometry
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.backend import MigError, MigFailure
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.mig import parse_mig_config
from runtimekit.runtime.nvml import NvmlBackend
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.values import AllocateInput, RuntimeSettings


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> MigNvml:
    gpus = [FakeGpu(0, "NVIDIA H200", 143771), FakeGpu(1, "NVIDIA A100-SXM4-80GB", 81920, mig=True)]
    return MigNvml(monkeypatch, gpus)


def opened(mode: str = "1:dynamic") -> NvmlBackend:
    backend = NvmlBackend(event_timeout_ms=20, mig_config=parse_mig_config(mode))
    backend.open()
    return backend


def a100(backend: NvmlBackend) -> GpuUUID:
    return backend.devices()[1].uuid


def test_the_profile_table_comes_from_nvml_and_matches_the_built_in_one(fake: MigNvml) -> None:
    backend = opened()
    h200, gpu = backend.devices()
    assert (h200.mig_mode, h200.mig_geometry) == (MigMode.OFF, None)
    assert gpu.mig_mode is MigMode.DYNAMIC
    assert gpu.mig_geometry is not None
    read = {(p.name, p.compute_slices, p.memory_mib, p.size, p.starts) for p in gpu.mig_geometry.profiles}
    table = geometry("A100-80GB")
    assert table is not None
    assert read == {(p.name, p.compute_slices, p.memory_mib, p.size, p.starts) for p in table.profiles}
    assert gpu.mig_geometry.slices == 8  # the +me variant (profile index 7) is not offered


def test_existing_instances_are_listed_with_their_starts(fake: MigNvml) -> None:
    gpu = fake.gpus[1]
    for gi_id, (index, start) in enumerate([(2, 4), (1, 0)], start=1):
        made = GpuInstance(gpu, gi_id, index, start)
        fake.nvmlGpuInstanceCreateComputeInstance(made, 0)
        fake.instances[1].append(made)
    backend = opened("")  # MIG enabled, no --mig-mode: static, listed only
    devices = backend.devices()[1]
    assert devices.mig_mode is MigMode.STATIC
    assert [(m.uuid, m.profile, m.start, m.gpu_instance_id, m.dynamic) for m in devices.mig_devices] == [
        ("MIG-1-gi2-s0", "2g.20gb", 0, 2, False),
        ("MIG-1-gi1-s4", "3g.40gb", 4, 1, False),
    ]
    # minor 11, GPU instance 2: 3 + 11 * 135 + 2 * 9
    assert devices.mig_devices[0].cap_paths == ("/dev/nvidia-caps/nvidia-cap1506", "/dev/nvidia-caps/nvidia-cap1507")
    with pytest.raises(MigError, match="not in dynamic MIG mode"):
        backend.create_mig_device(devices.uuid, "1g.10gb", 2)


def test_make_and_destroy_in_nvml_order(fake: MigNvml) -> None:
    backend = opened()
    made = backend.create_mig_device(a100(backend), "3g.40gb", 4)
    assert fake.mig_calls == ["create-gi", "create-ci:102"]  # NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE
    assert (made.uuid, made.profile, made.start, made.memory_mib, made.dynamic) == (
        "MIG-1-gi1-s4",
        "3g.40gb",
        4,
        40192,
        True,
    )
    assert backend.devices()[1].mig_devices == (made,)
    backend.destroy_mig_device(a100(backend), made.uuid)
    assert fake.mig_calls[2:] == ["destroy-ci", "destroy-gi"]
    assert backend.devices()[1].mig_devices == ()


@pytest.mark.parametrize(
    ("profile", "start", "failure", "message"),
    [
        pytest.param("3g.40gb", 2, MigFailure.INVALID, "valid starts: 0, 4", id="wrong-start"),
        pytest.param("1g.18gb", 0, MigFailure.INVALID, "no MIG profile", id="unknown-profile"),
        pytest.param("4g.40gb", 0, MigFailure.CONFLICT, "overlap", id="overlapping"),
    ],
)
def test_refusals_before_nvml_is_asked(
    fake: MigNvml, profile: str, start: int, failure: MigFailure, message: str
) -> None:
    backend = opened()
    backend.create_mig_device(a100(backend), "3g.40gb", 0)
    calls = list(fake.mig_calls)
    with pytest.raises(MigError, match=message) as refused:
        backend.create_mig_device(a100(backend), profile, start)
    assert refused.value.failure is failure
    assert fake.mig_calls == calls


def test_nvml_refusals_are_mapped(fake: MigNvml) -> None:
    backend = opened()
    behind = GpuInstance(fake.gpus[1], 9, 2, 0)  # made behind the runtime's back: its list is stale
    fake.instances[1].append(behind)
    with pytest.raises(MigError, match="slices are taken") as taken:
        backend.create_mig_device(a100(backend), "1g.10gb", 1)
    assert taken.value.failure is MigFailure.CONFLICT


def test_a_failed_compute_instance_rolls_the_gpu_instance_back(fake: MigNvml) -> None:
    backend = opened()
    fake.fail_compute = True
    with pytest.raises(MigError, match="the compute instance"):
        backend.create_mig_device(a100(backend), "7g.80gb", 0)
    assert fake.mig_calls == ["create-gi", "create-ci:104", "destroy-gi"]
    assert fake.instances[1] == []


def test_a_device_in_use_stays(fake: MigNvml) -> None:
    backend = opened()
    made = backend.create_mig_device(a100(backend), "2g.20gb", 2)
    fake.busy.add(made.uuid)
    with pytest.raises(MigError) as busy:
        backend.destroy_mig_device(a100(backend), made.uuid)
    assert busy.value.failure is MigFailure.IN_USE
    assert backend.devices()[1].mig_devices == (made,)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        pytest.param("dynamic", [MigMode.OFF, MigMode.DYNAMIC], id="dynamic-where-mig-is-on"),
        pytest.param("off", [MigMode.OFF, MigMode.STATIC], id="never-switches-mig-off"),
        pytest.param("", [MigMode.OFF, MigMode.STATIC], id="default-static"),
    ],
)
def test_the_hardware_decides_which_gpus_are_mig(fake: MigNvml, mode: str, expected: list[MigMode]) -> None:
    assert [d.mig_mode for d in opened(mode).devices()] == expected


def test_the_service_makes_mig_devices_through_nvml(fake: MigNvml, tmp_path: Path) -> None:
    backend = opened()
    runtime = NodeRuntime(
        RuntimeSettings("n1", tmp_path, KitProtocol.default()), backend, make_isolation("none"), mig=backend
    )
    runtime.start()
    try:
        gpu = a100(backend)
        ask = AllocateInput(PodRef("default", "p", "u1"), "main", (Share("", 0, 0, gpu, "1g.10gb", 6),))
        answer = runtime.allocate(ask)
        assert answer.edits.envs["NVIDIA_VISIBLE_DEVICES"] == "MIG-1-gi1-s6"
        assert answer.edits.cdi_devices == ("nvidia.com/gpu=MIG-1-gi1-s6",)
        runtime.release("u1")
        assert fake.instances[1] == []
    finally:
        runtime.close()


def _check_script() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "check_mig.py"
    spec = importlib.util.spec_from_file_location("check_mig", path)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_mig_check_reads_and_changes_nothing(
    fake: MigNvml, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = GpuInstance(fake.gpus[1], 1, 2, 4)
    fake.nvmlGpuInstanceCreateComputeInstance(made, 2)
    fake.instances[1].append(made)
    fake.mig_calls.clear()
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: "560.35.03")
    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuInstanceRemainingCapacity", lambda h, pid: 1)
    assert _check_script().main() == 0
    report = json.loads(capsys.readouterr().out)
    assert report["result"] == "ok", report["failures"]
    h200, a100 = report["gpus"]
    assert a100["mig_mode"] == {"current": 1, "pending": 1}
    assert a100["gpu_instance_profiles"]["2"]["placements"] == [[0, 4], [4, 4]]
    assert a100["gpu_instance_profiles"]["5"]["error"] == "NVMLError_NotSupported"
    assert a100["mig_devices"] == [{"uuid": "MIG-1-gi1-s4", "profile": "3g.40gb", "start": 4, "gi": 1, "ci": 0}]
    assert a100["differences_from_built_in_table"] == []
    assert h200["mig_mode"]["current"] == 0
    assert fake.mig_calls == []  # nothing made, nothing destroyed


def test_the_mig_check_is_skipped_without_a_driver(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    assert _check_script().main() == 0
    assert json.loads(capsys.readouterr().out)["result"] == "skipped: no NVIDIA GPU/driver"
