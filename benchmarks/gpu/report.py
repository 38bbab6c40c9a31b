"""Turn one run of `run_all.sh` (its folder of JSON and raw files) into the Markdown of a results page.

Sections: the machine; the runtime's and the exporter's readings against nvidia-smi; the simulated
backend's assumptions for the model against the real GPU (`runtimekit.runtime.simulated.assumptions`);
MIG's profile table against the built-in one; each isolation's rates per window against the shares,
the out-of-memory, crash and fault outcomes; attribution against nvidia-smi; and every failure the
checks reported. A check that was skipped or failed to run says so in its section.

Usage: python benchmarks/gpu/report.py RUN_FOLDER > docs/results/gpu-h200.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from smi import parse_query  # noqa: E402

SIMULATED_LEEWAY = 0.10  # an assumption further than 10 % from the real reading is listed as a mismatch


def load(folder: Path, name: str) -> dict[str, Any]:
    path = folder / name
    if not path.exists():
        return {"result": f"missing: no {name}"}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        return {"result": f"unreadable: {exc}"}
    return data if isinstance(data, dict) else {"result": "unreadable: not an object"}


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]
    return out


def _round(value: Any) -> Any:
    return round(value, 1) if isinstance(value, float) else value


def readings(nvml: dict[str, Any]) -> list[str]:
    served = nvml.get("served")
    if not served:
        return [f"Not run ({nvml.get('result')})."]
    out: list[str] = []
    for uuid, smi in served.get("nvidia_smi", {}).items():
        grpc = served.get("grpc_gpus", {}).get(uuid, {})
        raw = served.get("raw_nvml", {}).get(uuid, {})
        differences = served.get("differences", {}).get(uuid, {})
        out.append(f"GPU {uuid} ({smi.get('product')}, bus {smi.get('pci_bus_id')}):")
        out.append("")
        rows = []
        for name in (
            "memory_total_mib",
            "memory_used_mib",
            "memory_reserved_mib",
            "utilization_percent",
            "memory_utilization_percent",
            "temperature_celsius",
            "power_watts",
            "power_limit_watts",
            "sm_clock_mhz",
            "memory_clock_mhz",
        ):
            rows.append([name, _round(grpc.get(name)), _round(smi.get(name))])
        rows.append(["pci_bus_id (NVML)", raw.get("pci_bus_id"), smi.get("pci_bus_id")])
        rows.append(["NVML memory v1 used / v2 used + reserved", raw.get("v1"), raw.get("v2")])
        out += table(["reading", "runtime (gRPC)", "nvidia-smi"], rows)
        out.append("")
        for side in ("runtime", "exporter"):
            found = differences.get(side, [])
            out.append(f"- {side}: " + ("; ".join(found) if found else "agrees within the tolerances"))
        out.append("")
    return out


def unattributed_mib(sharing_report: dict[str, Any]) -> float | None:
    """The most memory the runtime found on the GPU beyond its containers' while clients ran (from the
    check without MPS, whose server would count there too)."""
    found = [
        float(r.get("memory_mib", 0))
        for reading in (sharing_report.get("readings") or {}).values()
        for r in reading.get("runtime_unattributed", [])
    ]
    return max(found) if found else None


def simulated(nvml: dict[str, Any], busy: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The simulated backend's assumptions against the real GPU (`busy`: the hami-core check's report,
    for what a GPU with containers reads beyond theirs); (lines, mismatches)."""
    from runtimekit.runtime.simulated import assumptions

    served = nvml.get("served") or {}
    lines: list[str] = []
    mismatches: list[str] = []
    for device in nvml.get("devices", []):
        model = str(device.get("model"))
        try:
            assumed = assumptions(model)
        except KeyError:
            lines.append(f"- {model}: not a built-in model; the simulator has no assumptions for it")
            continue
        smi = served.get("nvidia_smi", {}).get(device.get("uuid"), {})
        real = {
            "memory_total_mib": device.get("memory_mib"),
            "power_limit_watts": smi.get("power_limit_watts"),
            "idle_power_watts": smi.get("power_watts"),
            "max_sm_clock_mhz": smi.get("max_sm_clock_mhz"),
            "idle_sm_clock_mhz": smi.get("sm_clock_mhz"),
            "memory_clock_mhz": smi.get("max_memory_clock_mhz"),
            "used_beyond_containers_mib": unattributed_mib(busy),
        }
        rows = []
        for name, value in assumed.items():
            seen = real.get(name)
            far = seen is not None and abs(float(seen) - value) > SIMULATED_LEEWAY * max(abs(value), 1.0)
            rows.append([name, value, _round(seen), "differs" if far else ("" if seen is not None else "no reading")])
            if far:
                mismatches.append(f"{model} {name}: simulated {value}, real {seen}")
        lines.append(f"{model} (power and SM clock at idle; the memory beyond containers while clients ran):")
        lines.append("")
        lines += table(["assumption", "simulated", "real", ""], rows)
        lines.append("")
    return lines, mismatches


def mig(report: dict[str, Any]) -> list[str]:
    gpus = report.get("gpus")
    if not gpus:
        return [f"Not run ({report.get('result')})."]
    out = []
    for gpu in gpus:
        mode = gpu.get("mig_mode", gpu.get("mig"))
        differences = gpu.get("differences_from_built_in_table", [])
        offered = ", ".join(p["name"] for p in gpu.get("offered_profiles", []))
        out.append(f"- GPU {gpu.get('index')} ({gpu.get('product')}): MIG mode {mode}; profiles {offered or 'none'}")
        out.append("  - against the built-in table: " + ("; ".join(differences) if differences else "no difference"))
    return out


def sharing(report: dict[str, Any]) -> list[str]:
    verdict = report.get("verdict")
    if not verdict:
        return [f"Not run ({report.get('result')}{': ' + report['error'] if report.get('error') else ''})."]
    bare = report.get("bare", {})
    out = [f"Bare GPU: {bare.get('tflops')} TFLOP/s ({verdict['bare_rate']:.1f} products/s, no limits, no MPS).", ""]
    rows = []
    for window in report.get("windows", []):
        for client, entry in verdict["rates"].get(window, {}).items():
            judged = entry.get("within_10pct")
            mark = "" if judged is None else ("yes" if judged else "**no**")
            rows.append([window, client, entry["share"], entry["relative"], entry.get("tflops"), mark])
    out += table(["window", "client", "share", "rate / bare", "TFLOP/s", "within ±10 %"], rows)
    out.append("")
    for key in (
        "oom_error",
        "oom_refused",
        "oom_neighbour_ran_on",
        "crash_neighbour_ran_on",
        "fault_error",
        "fault_neighbour_ran_on",
        "fault_neighbour_error",
    ):
        if key in verdict:
            out.append(f"- {key.replace('_', ' ')}: {verdict[key]!r}")
    out.append(f"- cgroups: {report.get('cgroups', {}).get('base')}")
    out.append("")
    for window, found in verdict.get("attribution", {}).items():
        out.append(f"Attribution while {window} ran:")
        out.append("")
        rows = [
            [
                c,
                r["pid"],
                r["runtime_pids"],
                r["runtime_memory_mib"],
                r["smi_memory_mib"],
                r["runtime_sm_percent"],
                r["pmon_sm_percent"],
            ]
            for c, r in found["clients"].items()
        ]
        out += table(
            ["client", "pid", "runtime pids", "runtime MiB", "nvidia-smi MiB", "runtime SM %", "pmon SM %"], rows
        )
        out.append("")
    return out


def render(folder: Path) -> str:
    nvml, mig_report = load(folder, "nvml.json"), load(folder, "mig.json")
    lines = ["# One run of the real-GPU checks", ""]
    env = (folder / "env.txt").read_text(errors="replace") if (folder / "env.txt").exists() else ""
    lines += ["## The machine", "", "```", *env.strip().splitlines()[:40], "```", ""]
    if (folder / "nvidia-smi-q.xml").exists():
        try:
            driver, gpus = parse_query((folder / "nvidia-smi-q.xml").read_text())
            lines.append(f"Driver {driver}; " + ", ".join(f"{g.product} ({g.uuid})" for g in gpus.values()))
            lines.append("")
        except ValueError as exc:
            lines += [f"nvidia-smi -q -x: {exc}", ""]
    lines += ["## NVML readings against nvidia-smi", "", f"Check: {nvml.get('result')}.", ""]
    lines += readings(nvml)
    sim_lines, mismatches = simulated(nvml, load(folder, "hami.json"))
    lines += ["## The simulated backend's assumptions against the real GPU", "", *sim_lines]
    lines += ["## MIG", "", f"Check: {mig_report.get('result')}.", "", *mig(mig_report), ""]
    failures: list[str] = [f"nvml: {f}" for f in nvml.get("failures", [])]
    failures += [f"mig: {f}" for f in mig_report.get("failures", [])]
    for name, title in (("mps.json", "MPS"), ("hami.json", "HAMi-core")):
        report = load(folder, name)
        lines += [f"## {title} isolation", "", f"Check: {report.get('result')}.", "", *sharing(report)]
        failures += [f"{title}: {f}" for f in (report.get("verdict") or {}).get("failures", [])]
    lines += ["## Failures and mismatches", ""]
    lines += [f"- {f}" for f in failures + [f"simulated: {m}" for m in mismatches]] or ["None."]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: report.py RUN_FOLDER", file=sys.stderr)
        return 2
    sys.stdout.write(render(Path(sys.argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
