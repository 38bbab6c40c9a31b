"""Check the runtime's `nvml` backend on a real NVIDIA GPU; prints one JSON object.

Read-only: it never changes MIG mode, compute mode, clocks or power limits, and starts no MPS daemon.
Checks: NVML starts; every GPU enumerates (UUIDs are `str` and start with `GPU-`, MIG UUIDs with
`MIG-`, memory > 0); two samples read (utilisation, memory, temperature, power, ECC where supported);
the XID/ECC event set registers and waits without error for `--events-s`; which GPU-instance profiles
the GPU answers for and with which NVML error the others fail (protocols.md asks for this on the
H200); the runtime service books a share on the first GPU and returns its isolation env (bookkeeping
only). Without a GPU or driver it prints `skipped: no NVIDIA GPU/driver` and exits 0. Exits 1 when a
check fails.

Usage: python benchmarks/gpu/check_nvml.py [--events-s 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from runtimekit.api.runtime_client import Share
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import PodRef
from runtimekit.runtime.backend import BackendError, DeviceInfo
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.nvml import NvmlBackend, nvml_error_code
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.values import AllocateInput, RuntimeSettings


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


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events-s", type=float, default=2.0, help="how long to wait on the event set")
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        report, failures = check(args.events_s)
    except (BackendError, ImportError) as exc:
        print(json.dumps({"check": "nvml", "result": "skipped: no NVIDIA GPU/driver", "reason": str(exc)}, indent=2))
        return 0
    report |= {"check": "nvml", "result": "failed" if failures else "ok", "failures": failures}
    report["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(report, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
