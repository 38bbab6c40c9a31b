"""What `nvidia-smi` says, read into plain values, and how the kit's readings compare with it.

The GPU checks run `nvidia-smi` beside the runtime and hold the kit's readings against it:
- `parse_query(xml)`: `nvidia-smi -q -x`, per GPU UUID: product, PCI bus id, minor number, memory (total,
  used, reserved, MiB), utilisation (GPU, memory, %), temperature (C), power draw and limit (W), clocks
  (SM, memory, MHz), MIG mode; and the driver version;
- `parse_compute_apps(csv)`: `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name
  --format=csv,noheader,nounits`, the processes with their memory (MiB);
- `parse_pmon(text)`: `nvidia-smi pmon -c 1 -s um`, per PID its SM and memory utilisation (% or None for '-');
- `compare(kit, smi)`: the differences beyond each reading's tolerance (readings taken apart in time
  drift: utilisation, power and clocks are compared only when both sides are idle or both busy).
Pure functions on text, so the tests run them on outputs recorded on a real GPU.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def number(text: str | None) -> float | None:
    """The first number in a reading such as '143771 MiB', '35 C' or '120.45 W'; None for 'N/A' or nothing."""
    if text is None:
        return None
    found = _NUMBER.search(text)
    return float(found.group()) if found else None


def _find(node: ET.Element, *paths: str) -> str | None:
    """The text of the first of `paths` that exists under `node` (the XML moved some readings between
    driver versions: `power_readings` became `gpu_power_readings` in R530)."""
    for path in paths:
        found = node.find(path)
        if found is not None and found.text is not None:
            return found.text.strip()
    return None


POWER_DRAW = ("gpu_power_readings/instant_power_draw", "gpu_power_readings/power_draw", "power_readings/power_draw")


@dataclass(frozen=True)
class SmiGpu:
    uuid: str
    product: str
    pci_bus_id: str
    minor: int | None
    memory_total_mib: float | None
    memory_used_mib: float | None
    memory_reserved_mib: float | None
    utilization_percent: float | None
    memory_utilization_percent: float | None
    temperature_celsius: float | None
    power_watts: float | None
    power_limit_watts: float | None
    sm_clock_mhz: float | None
    memory_clock_mhz: float | None
    mig_mode: str
    max_sm_clock_mhz: float | None = None
    max_memory_clock_mhz: float | None = None


def parse_query(xml: str) -> tuple[str, dict[str, SmiGpu]]:
    """(driver version, GPUs by UUID) of `nvidia-smi -q -x`. Raises ValueError on text that is not its XML."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"not nvidia-smi -q -x output: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"not nvidia-smi -q -x output: root element {root.tag!r}")
    gpus: dict[str, SmiGpu] = {}
    for gpu in root.findall("gpu"):
        uuid = _find(gpu, "uuid") or ""
        minor = number(_find(gpu, "minor_number"))
        gpus[uuid] = SmiGpu(
            uuid=uuid,
            product=_find(gpu, "product_name") or "",
            pci_bus_id=(gpu.get("id") or _find(gpu, "pci/pci_bus_id") or "").upper(),
            minor=int(minor) if minor is not None else None,
            memory_total_mib=number(_find(gpu, "fb_memory_usage/total")),
            memory_used_mib=number(_find(gpu, "fb_memory_usage/used")),
            memory_reserved_mib=number(_find(gpu, "fb_memory_usage/reserved")),
            utilization_percent=number(_find(gpu, "utilization/gpu_util")),
            memory_utilization_percent=number(_find(gpu, "utilization/memory_util")),
            temperature_celsius=number(_find(gpu, "temperature/gpu_temp")),
            power_watts=number(_find(gpu, *POWER_DRAW)),
            power_limit_watts=number(
                _find(
                    gpu,
                    "gpu_power_readings/enforced_power_limit",
                    "gpu_power_readings/current_power_limit",
                    "power_readings/enforced_power_limit",
                )
            ),
            sm_clock_mhz=number(_find(gpu, "clocks/sm_clock")),
            memory_clock_mhz=number(_find(gpu, "clocks/mem_clock")),
            mig_mode=_find(gpu, "mig_mode/current_mig") or "N/A",
            max_sm_clock_mhz=number(_find(gpu, "max_clocks/sm_clock")),
            max_memory_clock_mhz=number(_find(gpu, "max_clocks/mem_clock")),
        )
    return _find(root, "driver_version") or "", gpus


@dataclass(frozen=True)
class SmiProcess:
    pid: int
    gpu_uuid: str
    memory_mib: float | None
    name: str


def parse_compute_apps(text: str) -> list[SmiProcess]:
    """`--query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,noheader,nounits` rows."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("No running"):
            continue
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) < 3 or not parts[0].isdigit():
            raise ValueError(f"not a compute-apps row: {line!r}")
        out.append(SmiProcess(int(parts[0]), parts[1], number(parts[2]), parts[3] if len(parts) > 3 else ""))
    return out


def parse_pmon(text: str) -> dict[int, dict[str, Any]]:
    """`nvidia-smi pmon -c 1 -s um`: per PID its GPU index, type, SM % and memory % (None where it prints '-')."""
    header: list[str] = []
    out: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            names = line.lstrip("#").split()
            if "pid" in names:
                header = names
            continue
        values = line.split()
        if not header or len(values) < len(header) or values[header.index("pid")] == "-":
            continue
        row = dict(zip(header, values, strict=False))
        out[int(row["pid"])] = {
            "gpu": int(row["gpu"]),
            "type": row.get("type", ""),
            "sm_percent": number(row.get("sm")) if row.get("sm", "-") != "-" else None,
            "mem_percent": number(row.get("mem")) if row.get("mem", "-") != "-" else None,
            "command": row.get("command", ""),
        }
    return out


# How far a kit reading may be from nvidia-smi's: (absolute, relative) tolerance. Memory in use and
# power move between the two reads; totals, clocks at rest, UUID and bus id must agree.
TOLERANCE: dict[str, tuple[float, float]] = {
    "memory_total_mib": (1.0, 0.0),
    "memory_used_mib": (64.0, 0.02),
    "memory_reserved_mib": (1.0, 0.0),
    "temperature_celsius": (3.0, 0.0),
    "power_watts": (25.0, 0.15),
    "power_limit_watts": (1.0, 0.0),
    "utilization_percent": (15.0, 0.0),
    "memory_utilization_percent": (15.0, 0.0),
    "sm_clock_mhz": (100.0, 0.1),
    "memory_clock_mhz": (100.0, 0.05),
}


def compare(kit: dict[str, Any], smi: SmiGpu) -> list[str]:
    """The readings of one GPU where the kit (a dict of the same names) and nvidia-smi disagree."""
    out = []
    for name, (absolute, relative) in TOLERANCE.items():
        mine, theirs = kit.get(name), getattr(smi, name)
        if mine is None or theirs is None:
            continue
        if abs(float(mine) - theirs) > max(absolute, relative * abs(theirs)):
            out.append(f"{name}: kit {mine} against nvidia-smi {theirs}")
    for name in ("uuid", "pci_bus_id"):
        mine = kit.get(name)
        if mine is not None and str(mine).upper() != str(getattr(smi, name)).upper():
            out.append(f"{name}: kit {mine} against nvidia-smi {getattr(smi, name)}")
    return out
