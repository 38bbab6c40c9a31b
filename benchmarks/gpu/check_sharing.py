"""Check a sharing isolation on a real NVIDIA GPU as the runtime sets it up; prints one JSON object.

1. Bare baseline: one `gpu_client.py` with no limits measures the GPU's bf16 matrix-product rate.
2. `runtimekit runtime --backend nvml --isolation ISOLATION` and `runtimekit exporter` start from the
   kit's command line (`kit.KitNode`); with mps the runtime starts the MPS control daemon itself.
3. Each client is a container to the runtime: the check calls the runtime's gRPC Allocate for it
   (a GPU share: compute milli and memory MiB), starts `gpu_client.py` with exactly the environment the
   answer holds (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`, or HAMi-core's
   `CUDA_DEVICE_SM_LIMIT`, `CUDA_DEVICE_MEMORY_LIMIT_0`, `CUDA_DEVICE_MEMORY_SHARED_CACHE` and
   `LD_PRELOAD`), and puts it in a kubelet-shaped
   cgroup (`/kubepods/besteffort/pod<uid>/<id>`) so the runtime's own attribution finds its container.
4. The clients run a schedule of windows (`SCHEDULE`): a memory-only share alone, each compute share
   alone, 30/70 together, 20/30/50 together, a client asking beyond its memory limit beside a busy one,
   a client that dies beside a busy one (and, with --fault, one with a GPU fault).
5. While 30/70 and 20/30/50 run, it reads the runtime's per-container usage (gRPC ExporterGetDataList),
   `nvidia-smi --query-compute-apps`, `nvidia-smi pmon` and the exporter's /metrics.
`evaluate` turns the raw results into verdicts (each share within ±10 % of its rate relative to the
bare baseline, the out-of-memory error, neighbours running on, attribution against nvidia-smi); it is
a pure function, tested on recorded results. Without a GPU it prints `skipped` and exits 0.

Usage: python benchmarks/gpu/check_sharing.py --isolation mps|hami-core [--window 5] [--fault]
           [--hami-lib-dir /usr/local/vgpu] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SHARE_TOLERANCE = 0.10  # a busy client's rate relative to the bare GPU, within ±10 % of its share
CGROUP_ROOT = Path("/sys/fs/cgroup")
APPS = "pid,gpu_uuid,used_memory,process_name"


@dataclass(frozen=True)
class Client:
    name: str
    core_milli: int  # 0: a memory-only share
    memory_mib: int


CLIENTS = (
    Client("mem-only", 0, 8192),
    Client("c30", 300, 4096),
    Client("c70", 700, 4096),
    Client("c20", 200, 4096),
    Client("c50", 500, 4096),
    Client("oom", 300, 2048),
    Client("crash", 300, 4096),
    Client("fault", 300, 4096),
)
OOM_ASK_MIB = 3072  # more than the oom client's 2,048 MiB limit, far less than the GPU has free

# (window name, {client: action}); every window lasts --window seconds, one second apart.
SCHEDULE: tuple[tuple[str, dict[str, str]], ...] = (
    ("mem-only alone", {"mem-only": "run"}),
    ("30 alone", {"c30": "run"}),
    ("70 alone", {"c70": "run"}),
    ("30+70", {"c30": "run", "c70": "run"}),
    ("20 alone", {"c20": "run"}),
    ("50 alone", {"c50": "run"}),
    ("20+30+50", {"c20": "run", "c30": "run", "c50": "run"}),
    ("oom beside 70", {"oom": "oom", "c70": "run"}),
    ("crash beside 70", {"crash": "crash", "c70": "run"}),
    ("fault beside 70", {"fault": "fault", "c70": "run"}),
)
SAMPLED = ("30+70", "20+30+50")  # windows during which usage is read


def schedule(fault: bool) -> list[tuple[str, dict[str, str]]]:
    return [w for w in SCHEDULE if fault or w[0] != "fault beside 70"]


def run(argv: list[str], timeout: float = 30) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    return done.stdout if done.returncode == 0 else f"error {done.returncode}: {done.stdout}{done.stderr}"


# -- cgroups ----------------------------------------------------------------------------------------


def cgroup_base() -> Path | None:
    """Where kubelet-shaped cgroups can be made: the v2 root, or a v1 hierarchy; None when neither can."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return CGROUP_ROOT
    for name in ("pids", "cpu,cpuacct", "cpu", "memory", "systemd"):
        if (CGROUP_ROOT / name / "cgroup.procs").exists():
            return CGROUP_ROOT / name
    return None


def place(base: Path | None, pid: int, pod_uid: str, container_id: str) -> str:
    """Move `pid` into `<base>/kubepods/besteffort/pod<uid>/<id>`; '' or why it could not."""
    if base is None:
        return "no writable cgroup hierarchy"
    folder = base / "kubepods" / "besteffort" / f"pod{pod_uid}" / container_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.procs").write_text(str(pid))
    except OSError as exc:
        return f"{folder}: {exc}"
    return ""


def remove_cgroups(base: Path | None) -> None:
    if base is None or not (base / "kubepods").exists():
        return
    for folder in sorted((base / "kubepods").rglob("*"), key=lambda p: -len(p.parts)):
        if folder.is_dir():
            with contextlib.suppress(OSError):
                folder.rmdir()
    with contextlib.suppress(OSError):
        (base / "kubepods").rmdir()


# -- the run ----------------------------------------------------------------------------------------


def start_clients(
    folder: Path, plans: dict[str, dict[str, Any]], envs: dict[str, dict[str, str]], size: int, dry: bool = False
) -> dict[str, subprocess.Popen[bytes]]:
    processes = {}
    for name, plan in plans.items():
        plan |= {
            "name": name,
            "out": str(folder / f"{name}.jsonl"),
            "ready": str(folder / f"{name}.ready"),
            "go": str(folder / "go"),
            "size": size,
            "oom_mib": OOM_ASK_MIB,
            "dry": dry,
        }
        path = folder / f"{name}.plan.json"
        path.write_text(json.dumps(plan))
        log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 - the child writes it until it ends
        env = {**os.environ, **envs.get(name, {})}
        processes[name] = subprocess.Popen(
            [sys.executable, str(HERE / "gpu_client.py"), str(path)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    return processes


def wait_ready(folder: Path, names: list[str], timeout: float = 120) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = {n: folder / f"{n}.ready" for n in names}
        if all(p.exists() and p.read_text() for p in ready.values()):
            return {n: int(p.read_text()) for n, p in ready.items()}
        time.sleep(0.1)
    late = [n for n in names if not (folder / f"{n}.ready").exists()]
    raise RuntimeError(f"clients not ready in {timeout} s: {late}")


def results(folder: Path, names: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        path = folder / f"{name}.jsonl"
        out[name] = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return out


def baseline(folder: Path, window: float, size: int, dry: bool) -> dict[str, Any]:
    """The bare GPU's rate: one client, no limits, no MPS."""
    plans = {"bare": {"windows": [{"start": 0.5, "seconds": window, "action": "run"}]}}
    processes = start_clients(folder, plans, {}, size, dry)
    wait_ready(folder, ["bare"])
    (folder / "go").write_text(str(time.time()))
    processes["bare"].wait(window + 60)
    (folder / "go").unlink()

    return results(folder, ["bare"])["bare"][0]


def usage_reading(node: Any, pynvml: Any) -> dict[str, Any]:
    """The runtime's per-container usage beside nvidia-smi's and NVML's own process lists."""
    from google.protobuf.json_format import MessageToDict

    node.client.exporter_data()  # starts the utilisation interval
    time.sleep(1.0)
    data = node.client.exporter_data()
    served = MessageToDict(data, preserving_proto_field_name=True)
    lists: dict[str, Any] = {}
    handle = pynvml.nvmlDeviceGetHandleByIndex(0) if pynvml is not None else None
    for name in (
        ()
        if pynvml is None
        else (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetMPSComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        )
    ):
        try:
            lists[name] = [{"pid": p.pid, "mib": (p.usedGpuMemory or 0) >> 20} for p in getattr(pynvml, name)(handle)]
        except Exception as exc:
            lists[name] = f"{type(exc).__name__}"
    try:
        if pynvml is None:
            raise LookupError("dry run")
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
        lists["nvmlDeviceGetProcessUtilization"] = [
            {"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil, "ts": s.timeStamp} for s in samples
        ]
    except Exception as exc:
        lists["nvmlDeviceGetProcessUtilization"] = f"{type(exc).__name__}"
    return {
        "runtime": served.get("container_usage", []),
        "runtime_unattributed": served.get("unattributed", []),
        "usage_source": data.usage_source,
        "nvml_lists": lists,
        "compute_apps": run(["nvidia-smi", f"--query-compute-apps={APPS}", "--format=csv,noheader,nounits"])
        if pynvml is not None
        else "error: dry run",
        "pmon": run(["nvidia-smi", "pmon", "-c", "1", "-s", "um"]) if pynvml is not None else "error: dry run",
        "metrics": node.scrape(),
    }


def check(
    isolation: str, window: float, fault: bool, size: int, hami_lib_dir: str, folder: Path, dry: bool = False
) -> dict[str, Any]:
    """The raw report of one isolation's run. `dry`: the simulated backend and CPU clients (no GPU)."""
    from kit import KitNode

    from runtimekit.api.runtime_client import Share

    pynvml: Any = None
    if not dry:
        import pynvml

        pynvml.nvmlInit()
    report: dict[str, Any] = {"isolation": isolation, "window_s": window, "size": size}
    (folder / "bare").mkdir(parents=True)
    report["bare"] = baseline(folder / "bare", window, size, dry)
    base = cgroup_base() if not dry else None
    windows = schedule(fault)
    with KitNode(folder / "kit", isolation, hami_lib_dir, "simulated" if dry else "nvml") as node:
        report["runtime_version"] = node.client.version().runtime_version
        gpu = node.client.list_devices()[0].uuid
        used = {c for _, members in windows for c in members}
        envs: dict[str, dict[str, str]] = {}
        pods: dict[str, str] = {}
        clients = {c.name: c for c in CLIENTS if c.name in used}
        pods = {name: str(uuid.uuid4()) for name in clients}

        def hold(names: list[str]) -> dict[str, dict[str, str]]:
            """Release every allocation, then allocate `names`: the runtime never books more than the GPU
            has, as the scheduler never places more, so each client's share is held while it matters."""
            for uid in pods.values():
                node.client.release(uid)
            got = {}
            for name in names:
                c = clients[name]
                answer = node.client.allocate(
                    "gpu-check", name, pods[name], "main", [Share(gpu, c.core_milli, c.memory_mib)]
                )
                got[name] = dict(answer.envs)
            return got

        envs: dict[str, dict[str, str]] = {}
        for name in clients:  # one at a time: each client's environment as the runtime writes it
            envs |= hold([name])
        report["envs"] = envs
        plans: dict[str, dict[str, Any]] = {name: {"windows": []} for name in envs}
        for index, (_, members) in enumerate(windows):
            for name, action in members.items():
                plans[name]["windows"].append(
                    {"index": index, "start": 1.0 + index * (window + 1.0), "seconds": window, "action": action}
                )
        run_dir = folder / "shared"
        run_dir.mkdir()
        processes = start_clients(run_dir, plans, envs, size, dry)
        placed = {}
        for name, process in processes.items():
            placed[name] = place(base, process.pid, pods[name], uuid.uuid4().hex + uuid.uuid4().hex) or "ok"
        report["cgroups"] = {"base": str(base), "placed": placed}
        report["pids"] = wait_ready(run_dir, list(processes))
        go = time.time()
        (run_dir / "go").write_text(str(go))
        readings: dict[str, Any] = {}
        report["same_env_when_held_again"] = {}
        for index, (name, members) in enumerate(windows):
            if name in SAMPLED:
                time.sleep(max(0.0, go + index * (window + 1.0) + 0.2 - time.time()))  # in the gap before it
                again = hold(list(members))
                report["same_env_when_held_again"][name] = all(
                    {k: v for k, v in envs[m].items() if k in again[m]} == again[m] for m in members
                )
                middle = go + 1.0 + index * (window + 1.0) + window / 2
                time.sleep(max(0.0, middle - 1.0 - time.time()))
                readings[name] = usage_reading(node, pynvml)
        end = go + len(windows) * (window + 1.0) + 5
        for process in processes.values():
            try:
                process.wait(max(1.0, end - time.time()) + 30)
            except subprocess.TimeoutExpired:
                process.kill()
        report["exit_codes"] = {n: p.returncode for n, p in processes.items()}
        report["readings"] = readings
        report["windows"] = [name for name, _ in windows]
        report["results"] = results(run_dir, list(processes))
        report["client_logs"] = {n: (run_dir / f"{n}.log").read_text(errors="replace")[-1500:] for n in processes}
        hold([])
        report["runtime_log"] = node.log("runtime")[-3000:]
        report["exporter_log"] = node.log("exporter")[-1500:]
    remove_cgroups(base)
    if pynvml is not None:
        pynvml.nvmlShutdown()
    return report


# -- verdicts ---------------------------------------------------------------------------------------


def share_of(client: str) -> float:
    core = next(c.core_milli for c in CLIENTS if c.name == client)
    return core / 1000 if core else 1.0


def evaluate(report: dict[str, Any]) -> dict[str, Any]:
    """Verdicts from a raw report: rates relative to the bare GPU against the shares, the memory limit,
    neighbours after a crash or fault, and the runtime's attribution against nvidia-smi."""
    bare = float(report["bare"].get("rate") or 0.0)
    by_window: dict[str, dict[str, dict[str, Any]]] = {}
    for client, records in report["results"].items():
        for r in records:
            by_window.setdefault(report["windows"][r["window"]], {})[client] = r
    rates: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    for window, members in by_window.items():
        rates[window] = {}
        busy = len(members) > 1
        for client, r in members.items():
            relative = float(r.get("rate") or 0.0) / bare if bare else 0.0
            share = share_of(client)
            entry = {"relative": round(relative, 3), "share": share, "tflops": r.get("tflops")}
            if (
                r.get("action") == "run"
                and (busy or client == "mem-only")
                and window
                not in (
                    "oom beside 70",
                    "crash beside 70",
                    "fault beside 70",
                )
            ):
                entry["within_10pct"] = abs(relative - share) <= SHARE_TOLERANCE * share
                if not entry["within_10pct"]:
                    failures.append(f"{window}: {client} ran at {relative:.3f} of the GPU against a share of {share}")
            rates[window][client] = entry
    verdict: dict[str, Any] = {"bare_rate": bare, "rates": rates}
    oom = by_window.get("oom beside 70", {})
    if oom:
        error = str(oom.get("oom", {}).get("oom_error", "no record"))
        verdict["oom_error"] = error
        verdict["oom_refused"] = "out of memory" in error.lower() or "outofmemory" in error.lower()
        verdict["oom_neighbour_ran_on"] = ran_after(oom.get("c70"), oom.get("oom", {}).get("event_at_s"))
        if not verdict["oom_refused"]:
            failures.append(f"oom: asking beyond the limit gave {error!r}, not CUDA's out-of-memory error")
        if not verdict["oom_neighbour_ran_on"]:
            failures.append("oom: the neighbour stopped")
    for window, client in (("crash beside 70", "crash"), ("fault beside 70", "fault")):
        members = by_window.get(window, {})
        if members:
            at = members.get(client, {}).get("event_at_s")
            verdict[f"{client}_neighbour_ran_on"] = ran_after(members.get("c70"), at)
            verdict[f"{client}_neighbour_error"] = members.get("c70", {}).get("error", "")
            if client == "fault":
                verdict["fault_error"] = members.get(client, {}).get("fault_error", "")
            if client == "crash" and not verdict["crash_neighbour_ran_on"]:
                failures.append("crash: the neighbour stopped when a client died")
    verdict["attribution"] = {w: attribution(report, w) for w in report.get("readings", {})}
    for window, found in verdict["attribution"].items():
        failures += [f"{window}: {p}" for p in found["problems"]]
    verdict["failures"] = failures
    return verdict


def ran_after(record: dict[str, Any] | None, at_s: float | None) -> bool:
    """Whether a client finished more products after `at_s` seconds into the window (timeline every 0.25 s)."""
    if record is None or at_s is None or "error" in record:
        return False
    timeline = record.get("timeline", [])
    mark = int(at_s / 0.25) + 1
    return len(timeline) > mark + 1 and timeline[-1] > timeline[mark]


def attribution(report: dict[str, Any], window: str) -> dict[str, Any]:
    """Per client busy in the window: what the runtime attributed to its container against nvidia-smi."""
    from smi import parse_compute_apps, parse_pmon

    reading = report["readings"][window]
    pid_of = report["pids"]
    members = [
        c for c, records in report["results"].items() for r in records if report["windows"][r["window"]] == window
    ]
    smi_memory = {}
    if not reading["compute_apps"].startswith("error"):
        smi_memory = {p.pid: p.memory_mib for p in parse_compute_apps(reading["compute_apps"])}
    pmon = parse_pmon(reading["pmon"]) if not reading["pmon"].startswith("error") else {}
    runtime = {u.get("pod"): u for u in reading["runtime"]}
    rows, problems = {}, []
    for client in members:
        pid = pid_of[client]
        mine = runtime.get(client, {})
        row = {
            "pid": pid,
            "runtime_pids": [int(p) for p in mine.get("pids", [])],
            "runtime_memory_mib": int(mine.get("memory_used_mib", 0)),
            "runtime_sm_percent": float(mine.get("sm_percent", 0.0)) if mine.get("sm_known") else None,
            "smi_memory_mib": smi_memory.get(pid),
            "pmon_sm_percent": (pmon.get(pid) or {}).get("sm_percent"),
        }
        rows[client] = row
        if pid not in row["runtime_pids"]:
            problems.append(f"{client} (pid {pid}) not attributed to its container by the runtime")
        elif row["smi_memory_mib"] is not None and abs(row["runtime_memory_mib"] - row["smi_memory_mib"]) > 64:
            problems.append(
                f"{client}: runtime {row['runtime_memory_mib']} MiB against nvidia-smi {row['smi_memory_mib']} MiB"
            )
    return {"clients": rows, "problems": problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--isolation", choices=("mps", "hami-core"), required=True)
    parser.add_argument("--window", type=float, default=5.0, help="seconds per window")
    parser.add_argument("--size", type=int, default=8192, help="matrix size (n×n bf16)")
    parser.add_argument("--fault", action="store_true", help="also run a client with a GPU fault, last")
    parser.add_argument("--hami-lib-dir", default="/usr/local/vgpu")
    parser.add_argument("--keep", default="", help="keep the scratch folder here")
    parser.add_argument("--dry-run", action="store_true", help="simulated GPU and CPU clients: the logic only")
    args = parser.parse_args()
    started = time.perf_counter()
    if shutil.which("nvidia-smi") is None and not args.dry_run:
        print(json.dumps({"check": f"sharing-{args.isolation}", "result": "skipped: no NVIDIA GPU/driver"}, indent=2))
        return 0
    if args.isolation == "hami-core" and not args.dry_run and not Path(args.hami_lib_dir, "libvgpu.so").exists():
        print(json.dumps({"check": "sharing-hami-core", "result": f"skipped: no {args.hami_lib_dir}/libvgpu.so"}))
        return 0
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpu-sharing-"))
    try:
        lib = str(folder / "vgpu") if args.dry_run else args.hami_lib_dir  # a dry run writes nothing outside
        report = check(args.isolation, args.window, args.fault, args.size, lib, folder, args.dry_run)
    except Exception as exc:
        print(json.dumps({"check": f"sharing-{args.isolation}", "result": "failed", "error": repr(exc)}, indent=2))
        return 1
    verdict = evaluate(report)
    report |= {"check": f"sharing-{args.isolation}", "verdict": verdict}
    report["result"] = "failed" if verdict["failures"] else "ok"
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2, default=str))
    return 1 if verdict["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
