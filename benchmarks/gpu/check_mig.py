"""Check what NVML says about MIG on a real NVIDIA GPU; prints one JSON object.

Read-only: it never changes MIG mode and never makes or destroys a GPU or compute instance, so it is
safe on a machine it does not own. Per GPU it lists the MIG mode (current and pending), every
GPU-instance profile index with the profile NVML answers (name, id, slices, memory, instance count,
possible placements, remaining capacity) or the NVML error it raises instead (protocols.md asks which
error the H200 gives), the GPU instances and MIG devices that exist (with their start slices, as the
runtime's `nvml` backend reads them), and how the profile table compares with the built-in one of
`runtimekit.model.mig` that the scheduler uses (a difference is a failure: the scheduler would place
slices the GPU cannot make). Without a GPU or driver it prints `skipped: no NVIDIA GPU/driver` and
exits 0. Exits 1 when a check fails.

Usage: python benchmarks/gpu/check_mig.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from runtimekit.model.mig import MigGeometry, geometry
from runtimekit.runtime import nvml_mig
from runtimekit.runtime.nvml import short_model


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _attempt(read: Callable[[int], Any], profile_id: int) -> Any:
    try:
        return read(profile_id)
    except Exception as exc:
        return f"{type(exc).__name__} (code {nvml_mig.error_code(exc)})"


def profiles(nvml: Any, handle: Any) -> dict[str, Any]:
    """Per GPU-instance profile index: what NVML answers, or the error it raises."""
    out: dict[str, Any] = {}
    for index in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", nvml_mig.GI_PROFILE_COUNT))):
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index, version=2)
        except Exception as exc:
            out[str(index)] = {"error": type(exc).__name__, "code": nvml_mig.error_code(exc)}
            continue
        entry: dict[str, Any] = {
            "name": _text(getattr(info, "name", b"")),
            "id": int(info.id),
            "slices": int(info.sliceCount),
            "instances": int(info.instanceCount),
            "memory_mib": int(info.memorySizeMB),
        }
        entry["placements"] = _attempt(lambda pid: nvml_mig.possible_placements(nvml, handle, pid), int(info.id))
        entry["remaining"] = _attempt(
            lambda pid: int(nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, pid)), int(info.id)
        )
        out[str(index)] = entry
    return out


def compare(read: MigGeometry | None, model: str) -> list[str]:
    """How NVML's profile table differs from the built-in one for the model ([] when it agrees or is unknown)."""
    built_in = geometry(model)
    if read is None or built_in is None:
        return []
    shape = {p.name: (p.compute_slices, p.size, p.starts, p.memory_mib) for p in read.profiles}
    table = {p.name: (p.compute_slices, p.size, p.starts, p.memory_mib) for p in built_in.profiles}
    out = [f"{name}: NVML has no such profile" for name in sorted(set(table) - set(shape))]
    out += [f"{name}: not in the built-in table" for name in sorted(set(shape) - set(table))]
    for name in sorted(set(shape) & set(table)):
        if shape[name] != table[name]:
            out.append(f"{name}: NVML (slices, size, starts, MiB) {shape[name]} != built-in {table[name]}")
    return out


def describe(nvml: Any, index: int, failures: list[str]) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    product = _text(nvml.nvmlDeviceGetName(handle))
    model = short_model(product)
    report: dict[str, Any] = {"index": index, "uuid": _text(nvml.nvmlDeviceGetUUID(handle)), "product": product}
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception as exc:
        report["mig"] = f"not supported ({type(exc).__name__})"
        return report
    report["mig_mode"] = {"current": int(current), "pending": int(pending)}
    report["gpu_instance_profiles"] = profiles(nvml, handle)
    table = nvml_mig.read_table(nvml, handle, model)
    report["offered_profiles"] = (
        [{"name": p.name, "size": p.size, "starts": list(p.starts)} for p in table.geometry.profiles] if table else []
    )
    differences = compare(table.geometry if table else None, model)
    report["differences_from_built_in_table"] = differences
    failures += [f"GPU {index} ({model}): {d}" for d in differences]
    if current == 1:
        minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
        migs = nvml_mig.read_mig_devices(nvml, handle, table, minor, dynamic=False)
        report["mig_devices"] = [
            {
                "uuid": m.uuid,
                "profile": m.profile,
                "start": m.start,
                "gi": m.gpu_instance_id,
                "ci": m.compute_instance_id,
            }
            for m in migs
        ]
        failures += [f"GPU {index}: MIG UUID {m.uuid!r}" for m in migs if not m.uuid.startswith("MIG-")]
        failures += [f"GPU {index}: no start slice for {m.uuid}" for m in migs if m.start < 0]
    return report


def check(nvml: Any) -> tuple[dict[str, Any], list[str]]:
    failures: list[str] = []
    report: dict[str, Any] = {"driver": _text(nvml.nvmlSystemGetDriverVersion())}
    report["gpus"] = [describe(nvml, i, failures) for i in range(nvml.nvmlDeviceGetCount())]
    return report, failures


def main() -> int:
    started = time.perf_counter()
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no nvidia-ml-py, no libnvidia-ml, no driver: nothing to check here
        print(json.dumps({"check": "mig", "result": "skipped: no NVIDIA GPU/driver", "reason": str(exc)}, indent=2))
        return 0
    try:
        report, failures = check(pynvml)
    finally:
        pynvml.nvmlShutdown()
    report |= {"check": "mig", "result": "failed" if failures else "ok", "failures": failures}
    report["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(report, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
