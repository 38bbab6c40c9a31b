"""Check the runtime's `nvml` backend on a real NVIDIA GPU; prints one JSON object.

Read-only: it never changes MIG mode, compute mode, clocks or power limits, and starts no MPS daemon.
Checks: NVML starts; every GPU enumerates (UUIDs are `str` and start with `GPU-`, MIG UUIDs with
`MIG-`, memory > 0); two samples read (utilisation, memory, temperature, power, ECC where supported);
the XID/ECC event set registers and waits without error for `--events-s`; which GPU-instance profiles
the GPU answers for and with which NVML error the others fail (protocols.md asks for this on the
H200); the runtime service books a share on the first GPU and returns its isolation env (bookkeeping
only). Then, where `nvidia-smi` exists (`--served`, the default): the kit as a user runs it
(`runtimekit runtime --backend nvml` and `runtimekit exporter`, `kit.KitNode`) serves its gRPC API over
the real GPU (devices, an Allocate and Release, the exporter's data) and its exporter is scraped, while
`nvidia-smi -q -x` is read at the same moment; the runtime's readings and the exporter's metrics are held
against nvidia-smi's (`smi.compare`: UUID, PCI bus id, memory, utilisation, temperature, power, clocks),
and NVML's raw memory readings (v1 and v2, with the reserved memory) are kept beside them. Without a GPU
or driver it prints `skipped: no NVIDIA GPU/driver` and exits 0. Exits 1 when a check fails.

Usage: python benchmarks/gpu/check_nvml.py [--events-s 2] [--no-served]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

MIB = 1 << 20
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from runtimekit.api.runtime_client import Share  # noqa: E402
from runtimekit.protocol import KitProtocol  # noqa: E402
from runtimekit.runtime.allocations import PodRef  # noqa: E402
from runtimekit.runtime.backend import BackendError, DeviceInfo  # noqa: E402
from runtimekit.runtime.isolation import make_isolation  # noqa: E402
from runtimekit.runtime.nvml import NvmlBackend, nvml_error_code  # noqa: E402
from runtimekit.runtime.service import NodeRuntime  # noqa: E402
from runtimekit.runtime.values import AllocateInput, RuntimeSettings  # noqa: E402


def gi_profiles(nvml: Any, handle: Any) -> dict[str, str]:
    """Per GPU-instance profile index: the profile's name and memory, or the NVML error it raises."""
    out = {}
    for index in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0))):
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
            name = getattr(info, "name", b"")
            name = name.decode() if isinstance(name, bytes) else str(name)
            out[str(index)] = f"{name or 'unnamed'} id={info.id} slices={info.sliceCount} mem={info.memorySizeMB}MB"
        except Exception as exc:
            out[str(index)] = f"{type(exc).__name__} (code {nvml_error_code(exc)})"
    return out


def check(events_s: float) -> tuple[dict[str, Any], list[str]]:
    """Run the runtime service on the nvml backend and look at what it reports; (report, failures)."""
    import pynvml

    failures: list[str] = []
    backend = NvmlBackend(event_timeout_ms=200)
    backend.open()
    report: dict[str, Any] = {"driver": str(pynvml.nvmlSystemGetDriverVersion())}
    with tempfile.TemporaryDirectory() as state:
        runtime = NodeRuntime(
            RuntimeSettings("check-nvml", Path(state), KitProtocol.default()), backend, make_isolation("mps")
        )
        runtime.start()  # enumerates the GPUs and registers the XID/ECC event set
        try:
            report["devices"] = [describe(pynvml, device, failures) for device in backend.devices()]
            runtime.exporter_data()
            data = runtime.exporter_data()
            report["samples"] = [g.sample.__dict__ | {"mig_mode": str(g.sample.mig_mode)} for g in data.gpus]
            failures += [f"GPU {g.view.info.index}: cannot be read" for g in data.gpus if g.sample.lost]
            threading.Event().wait(events_s)
            views = runtime.device_snapshot().devices
            report["health_after_events"] = {v.info.index: v.reason or "healthy" for v in views}
            report["xid_events_during_check"] = {g.view.info.index: g.xid_count for g in runtime.exporter_data().gpus}
            shareable = [v.info for v in views if not v.info.mig_devices]
            if shareable:
                uuid = shareable[0].uuid
                answer = runtime.allocate(
                    AllocateInput(PodRef("default", "check", "uid-check"), "main", (Share(uuid, 500, 1024),))
                )
                report["runtime_allocate_env"] = dict(answer.edits.envs)
                runtime.release("uid-check")
        finally:
            runtime.close()
    report["mps_control_binary"] = shutil.which("nvidia-cuda-mps-control")
    return report, failures


def describe(nvml: Any, device: DeviceInfo, failures: list[str]) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(device.index)
    raw_uuid = nvml.nvmlDeviceGetUUID(handle)
    if not isinstance(raw_uuid, str) or not device.uuid.startswith("GPU-"):
        failures.append(f"GPU {device.index}: UUID {raw_uuid!r} is not a str starting with GPU-")
    if device.memory_mib <= 0:
        failures.append(f"GPU {device.index}: memory {device.memory_mib} MiB")
    failures += [
        f"GPU {device.index}: MIG UUID {m.uuid!r}" for m in device.mig_devices if not m.uuid.startswith("MIG-")
    ]
    return {
        "index": device.index,
        "uuid": device.uuid,
        "uuid_type": type(raw_uuid).__name__,
        "model": device.model,
        "product": device.product,
        "memory_mib": device.memory_mib,
        "minor": device.minor,
        "numa_node": device.numa_node,
        "mig_mode": str(device.mig_mode),
        "mig_devices": [m.__dict__ for m in device.mig_devices],
        "gpu_instance_profiles": gi_profiles(nvml, handle),
    }


def raw_memory(nvml: Any, handle: Any) -> dict[str, Any]:
    """NVML's memory readings both ways: v1 (`used` counts the driver's reservation) and v2 (apart)."""
    out: dict[str, Any] = {}
    v1 = nvml.nvmlDeviceGetMemoryInfo(handle)
    out["v1"] = {"total": v1.total >> 20, "used": v1.used >> 20, "free": v1.free >> 20}
    try:
        v2 = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        out["v2"] = {k: getattr(v2, k) >> 20 for k in ("total", "reserved", "used", "free")}
    except Exception as exc:
        out["v2"] = f"{type(exc).__name__}"
    try:
        out["pci_bus_id"] = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
    except Exception as exc:
        out["pci_bus_id"] = f"{type(exc).__name__}"
    return out


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def metric_values(text: str, name: str) -> dict[str, float]:
    """The exporter's values of one metric by `uuid` label."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.labels.get("uuid", ""): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def served(nvml: Any, failures: list[str]) -> dict[str, Any]:
    """The kit's runtime and exporter over the real GPU, held against nvidia-smi read at the same time."""
    from google.protobuf.json_format import MessageToDict
    from kit import KitNode

    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder, KitNode(Path(folder), "none") as node:
        devices = node.client.list_devices()
        report["grpc_devices"] = [MessageToDict(d, preserving_proto_field_name=True) for d in devices]
        answer = node.client.allocate("default", "served", "uid-served", "main", [Share(devices[0].uuid, 250, 2048)])
        report["grpc_allocate_envs"] = dict(answer.envs)
        report["grpc_allocations"] = len(node.client.list_allocations())
        node.client.exporter_data()
        data = node.client.exporter_data()
        xml = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, check=True).stdout
        metrics = node.scrape()
        report["grpc_released"] = node.client.release("uid-served")
    raw = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        raw[_text(nvml.nvmlDeviceGetUUID(handle))] = raw_memory(nvml, handle)
    return report | held_against_smi(data, metrics, xml, raw, failures)


def kit_readings(g: Any) -> dict[str, Any]:
    """A served `GpuSample` message's readings under smi.compare's names (None where the field is unset)."""

    def optional(name: str) -> Any:
        return getattr(g, name) if g.HasField(name) else None

    return {
        "uuid": g.uuid,
        "memory_total_mib": g.memory_total_mib,
        "memory_used_mib": g.memory_used_mib,
        "memory_reserved_mib": optional("memory_reserved_mib"),
        "temperature_celsius": g.temperature_celsius,
        "power_watts": g.power_watts,
        "power_limit_watts": g.power_limit_watts,
        "utilization_percent": g.utilization_percent,
        "memory_utilization_percent": g.memory_utilization_percent,
        "sm_clock_mhz": optional("sm_clock_mhz"),
        "memory_clock_mhz": optional("memory_clock_mhz"),
    }


def scraped_readings(metrics: str) -> dict[str, dict[str, float]]:
    """The exporter's GPU families, per reading name and GPU UUID, in smi.compare's units."""

    def family(name: str, scale: float = 1.0) -> dict[str, float]:
        return {u: v * scale for u, v in metric_values(metrics, name).items()}

    return {
        "memory_used_mib": family("runtimekit_gpu_memory_used_bytes", 1 / MIB),
        "memory_total_mib": family("runtimekit_gpu_memory_total_bytes", 1 / MIB),
        "memory_reserved_mib": family("runtimekit_gpu_memory_reserved_bytes", 1 / MIB),
        "temperature_celsius": family("runtimekit_gpu_temperature_celsius"),
        "power_watts": family("runtimekit_gpu_power_watts"),
        "power_limit_watts": family("runtimekit_gpu_power_limit_watts"),
        "utilization_percent": family("runtimekit_gpu_utilization_ratio", 100.0),
    }


def held_against_smi(
    data: Any, metrics: str, xml: str, raw: dict[str, dict[str, Any]], failures: list[str]
) -> dict[str, Any]:
    """The runtime's served readings (an `ExporterGetDataListResponse`) and the exporter's scrape, each
    against `nvidia-smi -q -x` (`xml`), per GPU; `raw`: NVML's own memory readings and bus id by UUID.
    Pure, so the tests run it on a simulated runtime and a recorded nvidia-smi output."""
    from google.protobuf.json_format import MessageToDict
    from smi import compare, parse_query

    driver, smi_gpus = parse_query(xml)
    gpus = {g.uuid: g for g in data.gpus}
    scraped = scraped_readings(metrics)
    report: dict[str, Any] = {
        "nvidia_smi_driver": driver,
        "nvidia_smi": {u: g.__dict__ for u, g in smi_gpus.items()},
        "raw_nvml": raw,
        "grpc_gpus": {u: MessageToDict(g, preserving_proto_field_name=True) for u, g in gpus.items()},
        "metric_families": sorted({line.split()[2] for line in metrics.splitlines() if line.startswith("# TYPE")}),
        "differences": {},
    }
    for uuid, g in gpus.items():
        smi = smi_gpus.get(uuid)
        if smi is None:
            failures.append(f"GPU {g.index} ({uuid}): not in nvidia-smi -q -x")
            continue
        kit = kit_readings(g) | {"pci_bus_id": raw.get(uuid, {}).get("pci_bus_id")}
        runtime = compare(kit, smi)
        exporter = compare({name: values.get(uuid) for name, values in scraped.items()}, smi)
        report["differences"][uuid] = {"runtime": runtime, "exporter": exporter}
        failures += [f"GPU {g.index} runtime: {d}" for d in runtime]
        failures += [f"GPU {g.index} exporter: {d}" for d in exporter]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events-s", type=float, default=2.0, help="how long to wait on the event set")
    parser.add_argument("--no-served", action="store_true", help="skip the served runtime and exporter")
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        report, failures = check(args.events_s)
    except (BackendError, ImportError) as exc:
        print(json.dumps({"check": "nvml", "result": "skipped: no NVIDIA GPU/driver", "reason": str(exc)}, indent=2))
        return 0
    if not args.no_served and shutil.which("nvidia-smi") is not None:
        import pynvml

        pynvml.nvmlInit()
        try:
            report["served"] = served(pynvml, failures)
        except Exception as exc:
            failures.append(f"served: {type(exc).__name__}: {exc}")
        finally:
            pynvml.nvmlShutdown()
    report |= {"check": "nvml", "result": "failed" if failures else "ok", "failures": failures}
    report["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(report, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
