"""Exporter scrape latency and memory (issue 35's figure): a simulated runtime with `--gpus` GPUs (8)
and `--containers` containers holding a share each (64: `--containers-per-pod` 2 per pod, spread over
the GPUs), the exporter as its own process (`runtimekit exporter`, `--exporter-arg` passed on, e.g.
`--exporter-arg=--metrics-compat=dcgm` where the exporter has it), /metrics scraped over HTTP
`--scrapes` times after `--warmup` scrapes that are not counted.

Prints one JSON record: its configuration (GPUs, containers, pods, scrapes, exporter arguments), the
code version (commit, Python, CPUs), series and bytes per scrape, scrape latency p50/p99/max, the
exporter's CPU time per scrape (what a scrape costs apart from waiting for a core on a busy machine),
the 1-minute load average, its RSS after the scrapes and its peak (VmHWM), the limits (p99 <= 20 ms, RSS <= 80 MB) and
whether both hold; exits 1 when one does not (`--output FILE` also writes the record there).
Usage: .venv/bin/python benchmarks/bench_exporter.py [--scrapes 500] [--gpus 8 --containers 64]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.simusage import SimulatedUsage, usage_annotations
from runtimekit.runtime.values import RuntimeSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LIMIT_P99_MS = 20.0
LIMIT_RSS_MB = 80.0


def status_mb(pid: int, field: str) -> float:
    """A /proc/PID/status memory field (VmRSS: now, VmHWM: peak) in MB (MiB, as the kernel's kB are KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (/proc/PID/stat): a scrape's cost apart from waiting for a core."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def percentile(times: list[float], q: float) -> float:
    return round(1000 * sorted(times)[min(int(q * len(times)), len(times) - 1)], 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20, help="scrapes before the measured ones")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--containers", type=int, default=64)
    parser.add_argument("--containers-per-pod", type=int, default=2)
    parser.add_argument("--exporter-arg", action="append", default=[], help="passed on to runtimekit exporter")
    parser.add_argument("--output", help="also write the JSON record to this file")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rkb-"))
    backend = SimulatedBackend("bench", parse_gpu_spec(f"{args.gpus}xH200"))
    service = NodeRuntime(
        RuntimeSettings("bench", folder / "state", KitProtocol.default(), "0.1.0", 30.0),
        backend,
        make_isolation("mps"),
        # the simulated usage model, as `runtimekit runtime --backend simulated` has it: every container's
        # usage is attributed, so each scrape carries the per-container families too
        usage=SimulatedUsage(usage_annotations(KitProtocol.default().annotations.simulated_runtime)),
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    with RuntimeClient(sock) as client:
        gpus = client.list_devices()
        per_gpu = -(-args.containers // args.gpus)  # containers sharing one GPU: their shares fit in it
        for i in range(args.containers):
            pod = i // args.containers_per_pod
            client.allocate(
                "bench",
                f"pod-{pod:03d}",
                f"uid-{pod}",
                f"c{i % args.containers_per_pod}",
                [pb.GpuShare(uuid=gpus[i % args.gpus].uuid, core_milli=1000 // per_gpu, memory_mib=2048)],
            )
    port = free_port()
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtimekit.cli.main",
            "--log-level",
            "WARNING",
            "exporter",
            "--runtime-socket",
            sock,
            "--listen",
            f"127.0.0.1:{port}",
            *args.exporter_arg,
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with httpx2.Client(timeout=5) as http:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    http.get(url)
                    break
                except httpx2.HTTPError:
                    time.sleep(0.1)
            for _ in range(args.warmup):
                http.get(url)
            times = []
            body = ""
            cpu_before = cpu_seconds(exporter.pid)
            for _ in range(args.scrapes):
                started = time.perf_counter()
                body = http.get(url).text
                times.append(time.perf_counter() - started)
            cpu = cpu_seconds(exporter.pid) - cpu_before
        series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        containers = sum(
            1 for line in body.splitlines() if line.startswith("runtimekit_container_gpu_memory_used_bytes{")
        )
        p99, rss = percentile(times, 0.99), status_mb(exporter.pid, "VmRSS")
        record = {
            "benchmark": "bench_exporter",
            "commit": commit(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "gpus": args.gpus,
            "containers": args.containers,
            "pods": -(-args.containers // args.containers_per_pod),
            "exporter_args": args.exporter_arg,
            "scrapes": args.scrapes,
            "warmup": args.warmup,
            "series_per_scrape": series,
            "containers_with_usage_series": containers,
            "bytes_per_scrape": len(body.encode()),
            "scrape_p50_ms": percentile(times, 0.5),
            "scrape_p99_ms": p99,
            "scrape_max_ms": round(1000 * max(times), 2),
            "exporter_cpu_ms_per_scrape": round(1000 * cpu / args.scrapes, 2),
            "load_average_1m": os.getloadavg()[0],
            "exporter_rss_mb": rss,
            "exporter_peak_rss_mb": status_mb(exporter.pid, "VmHWM"),
            "limits": {"scrape_p99_ms": LIMIT_P99_MS, "exporter_rss_mb": LIMIT_RSS_MB},
            "within_limits": p99 <= LIMIT_P99_MS and rss <= LIMIT_RSS_MB,
        }
        text = json.dumps(record, indent=2)
        print(text)
        if args.output:
            Path(args.output).write_text(text + "\n")
    finally:
        exporter.send_signal(signal.SIGTERM)
        exporter.wait(10)
        daemon.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if record["within_limits"] else 1


if __name__ == "__main__":
    sys.exit(main())
