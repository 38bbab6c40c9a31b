"""The NVML backend's code paths with `pynvml` functions patched (no GPU needed)."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from nvml_fakes import MIB, RESERVED_MIB, FakeGpu, FakeNvml, err

from runtimekit.model import MigMode
from runtimekit.runtime.backend import BackendError, EventKind, HealthEvent
from runtimekit.runtime.nvml import NvmlBackend, short_model


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    gpus = [FakeGpu(0, "NVIDIA H200", 143771), FakeGpu(1, "NVIDIA A100-SXM4-80GB", 81920, mig=True)]
    gpus.append(FakeGpu(2, "Tesla T4", 15360, ecc=False))
    return FakeNvml(monkeypatch, gpus)


def open_backend(timeout_ms: int = 20) -> NvmlBackend:
    backend = NvmlBackend(event_timeout_ms=timeout_ms, clock=lambda: 3.0)
    backend.open()
    return backend


def test_enumerates_devices_and_mig(fake: FakeNvml) -> None:
    backend = open_backend()
    h200, a100, t4 = backend.devices()
    assert (h200.model, h200.product, h200.memory_mib, h200.minor, h200.numa_node) == (
        "H200",
        "NVIDIA H200",
        143771,
        10,
        -1,
    )
    assert (h200.mig_mode, t4.mig_mode, t4.model) == (MigMode.OFF, MigMode.OFF, "T4")
    assert a100.mig_mode is MigMode.STATIC
    assert [(m.uuid, m.profile, m.gpu_instance_id, m.memory_mib) for m in a100.mig_devices] == [
        ("MIG-1-0", "3g.71gb", 1, 72448),
        ("MIG-1-1", "3g.71gb", 2, 72448),
    ]
    backend.close()
    assert fake.calls == ["init", "shutdown"]


def test_memory_in_use_leaves_out_the_drivers_reservation_where_the_driver_says_it(fake: FakeNvml) -> None:
    """nvidia-smi and DCGM count memory in use without the driver's reservation (version 2 of the reading);
    version 1 counts it as used, so an idle GPU would read some 500 MiB used that no process holds."""
    fake.gpus[2].memory_v2 = False  # type: ignore[attr-defined]  # an old driver
    backend = open_backend()
    h200, _, t4 = backend.sample({})
    assert (h200.memory_used_mib, h200.memory_reserved_mib) == (143771 // 4, RESERVED_MIB)
    assert t4.memory_used_mib == 15360 // 4 + RESERVED_MIB  # version 1 where version 2 is refused
    assert t4.memory_reserved_mib is None  # and the reservation is not known
    assert backend.sample({})[2].memory_used_mib == 15360 // 4 + RESERVED_MIB


def test_samples(fake: FakeNvml) -> None:
    backend = open_backend()
    assert {d.driver_version for d in backend.devices()} == {"550.54.15"}
    h200, _, t4 = backend.sample({})
    assert (h200.utilization_percent, h200.memory_utilization_percent, h200.temperature_celsius) == (42.0, 17.0, 55.0)
    assert (h200.power_watts, h200.power_limit_watts) == (312.5, 700.0)
    assert (h200.memory_used_mib, h200.memory_total_mib) == (143771 // 4, 143771)  # the reservation apart
    assert (h200.ecc_corrected, h200.ecc_uncorrected) == (7, 2)
    assert (t4.ecc_corrected, t4.ecc_uncorrected) == (0, 0)  # consumer GPU: NotSupported
    assert (h200.sm_clock_mhz, h200.memory_clock_mhz, h200.energy_millijoules, h200.pcie_replays) == (
        1755,
        3201,
        9_876_543,
        4,
    )
    assert (h200.encoder_utilization_percent, h200.decoder_utilization_percent) == (12.0, 3.0)
    # what NVML does not give on a GPU has no value (the exporter leaves it out), not zero
    assert (t4.encoder_utilization_percent, t4.decoder_utilization_percent) == (None, None)
    fake.gpus[0].lost = True
    lost = backend.sample({})[0]
    assert lost.lost
    assert lost.memory_total_mib == 143771


def test_library_missing_is_a_backend_error(fake: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library() -> None:
        raise err(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    with pytest.raises(BackendError, match="NVML cannot start"):
        NvmlBackend().open()


def test_product_names() -> None:
    assert short_model("NVIDIA H200") == "H200"
    assert short_model("NVIDIA H200 NVL") == "H200-NVL"
    assert short_model("NVIDIA GeForce RTX 4090") == "GeForce-RTX-4090"


def test_events_thread_reports_xid_and_ecc(fake: FakeNvml) -> None:
    backend = open_backend()
    got: list[HealthEvent] = []
    done = threading.Event()

    def listener(event: HealthEvent) -> None:
        got.append(event)
        if len(got) == 4:
            done.set()

    backend.start_events(listener)
    mask = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeDoubleBitEccError
    mask |= pynvml.nvmlEventTypeSingleBitEccError
    assert fake.registered == [(0, mask), (1, mask)]  # the T4 cannot report events: logged, skipped
    gpu0, gpu1 = fake.gpus[0], fake.gpus[1]
    fake.events.put(SimpleNamespace(device=gpu0, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79))
    fake.events.put(SimpleNamespace(device=gpu1, eventType=pynvml.nvmlEventTypeDoubleBitEccError, eventData=0))
    fake.events.put(SimpleNamespace(device=gpu1, eventType=pynvml.nvmlEventTypeSingleBitEccError, eventData=0))
    fake.events.put(err(pynvml.NVML_ERROR_UNKNOWN))
    assert done.wait(5.0)
    backend.close()
    assert [(e.kind, e.uuid, e.xid, e.uncorrectable) for e in got] == [
        (EventKind.XID, gpu0.uuid, 79, False),
        (EventKind.ECC, gpu1.uuid, 0, True),
        (EventKind.ECC, gpu1.uuid, 0, False),
        (EventKind.ERROR, None, 0, False),
    ]
    assert got[0].unix_ms == 3000
    assert fake.calls[-2:] == ["free", "shutdown"]


def test_gpu_check_script_runs_on_patched_nvml(
    fake: FakeNvml, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "check_nvml.py"
    spec = importlib.util.spec_from_file_location("check_nvml", path)
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: "560.35.03")

    def profile(handle: Any, index: int, version: int = 2) -> Any:
        if index > 1:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(name="MIG 1g.18gb", id=19, sliceCount=1, memorySizeMB=16384, instanceCount=7)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuInstanceProfileInfo", profile)
    monkeypatch.setattr(sys, "argv", ["check_nvml.py", "--events-s", "0"])
    assert script.main() == 0
    report = json.loads(capsys.readouterr().out)
    assert report["result"] == "ok"
    assert [d["uuid_type"] for d in report["devices"]] == ["str", "str", "str"]
    assert report["devices"][0]["gpu_instance_profiles"]["0"].startswith("MIG 1g.18gb id=19")
    assert "NVMLError_NotSupported" in report["devices"][0]["gpu_instance_profiles"]["2"]
    assert report["runtime_allocate_env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"


def test_the_reservation_reaches_the_exporter_over_grpc(fake: FakeNvml, tmp_path: Any) -> None:
    """The runtime serves the reservation (an optional field: absent where the driver gives none) and the
    exporter writes it as its own family and as dcgm-exporter's FB_RESERVED, with FB_FREE leaving it out."""
    from runtimekit.api.runtime_client import RuntimeClient
    from runtimekit.exporter.collector import gpu_families
    from runtimekit.exporter.compat_dcgm import dcgm_families
    from runtimekit.exporter.sample import read_sample
    from runtimekit.protocol import KitProtocol
    from runtimekit.runtime.daemon import RuntimeDaemon
    from runtimekit.runtime.isolation import make_isolation
    from runtimekit.runtime.service import NodeRuntime
    from runtimekit.runtime.values import RuntimeSettings

    fake.gpus[2].memory_v2 = False  # type: ignore[attr-defined]  # the T4 on an old driver
    settings = RuntimeSettings("node-a", tmp_path / "state", KitProtocol.default())
    runtime = NodeRuntime(settings, open_backend(), make_isolation("none"))
    daemon = RuntimeDaemon(runtime, str(tmp_path / "rt.sock"), reconcile_interval_s=0).start()
    client = RuntimeClient(daemon.socket_path, timeout_s=5.0)
    try:
        served = {g.model: g for g in client.exporter_data().gpus}
        sample = read_sample(client, "node-a")
    finally:
        client.close()
        daemon.stop()
    assert served["H200"].memory_reserved_mib == RESERVED_MIB
    assert not served["T4"].HasField("memory_reserved_mib")
    reserved = {
        s.labels["model"]: s.value
        for f in gpu_families(sample)
        if f.name == "runtimekit_gpu_memory_reserved_bytes"
        for s in f.samples
    }
    assert reserved == {"H200": RESERVED_MIB * MIB, "A100-80GB": RESERVED_MIB * MIB}  # none for the T4, not 0
    dcgm = {(f.name, s.labels["gpu"]): s.value for f in dcgm_families(sample) for s in f.samples}
    assert dcgm["DCGM_FI_DEV_FB_FREE", "0"] == 143771 - 143771 // 4 - RESERVED_MIB
    assert ("DCGM_FI_DEV_FB_RESERVED", "2") not in dcgm
