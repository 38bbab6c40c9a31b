"""Exporter scrape latency and memory: a simulated runtime with 8 GPUs and 64 allocations, the
exporter as its own process (`runtimekit exporter`), /metrics scraped over HTTP `--scrapes` times.

Prints JSON: scrape latency p50/p99/max (target p99 <= 20 ms), the exporter's RSS after the scrapes
(target <= 80 MB), series per scrape.
Usage: .venv/bin/python benchmarks/bench_exporter.py [--scrapes 500]
"""

from __future__ import annotations

import argparse
import json
import os
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
from runtimekit.runtime.values import RuntimeSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=500)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rkb-"))
    backend = SimulatedBackend("bench", parse_gpu_spec("8xH200"))
    service = NodeRuntime(
        RuntimeSettings("bench", folder / "state", KitProtocol.default(), "0.1.0", 30.0), backend, make_isolation("mps")
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    with RuntimeClient(sock) as client:
        gpus = client.list_devices()
        for i in range(64):
            client.allocate(
                "bench",
                f"pod-{i:02d}",
                f"uid-{i}",
                "main",
                [pb.GpuShare(uuid=gpus[i % 8].uuid, core_milli=120, memory_mib=2048)],
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
            times = []
            series = 0
            for _ in range(args.scrapes):
                started = time.perf_counter()
                body = http.get(url).text
                times.append(time.perf_counter() - started)
                series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        times.sort()
        print(
            json.dumps(
                {
                    "gpus": 8,
                    "allocations": 64,
                    "scrapes": args.scrapes,
                    "series_per_scrape": series,
                    "scrape_p50_ms": round(1000 * times[len(times) // 2], 2),
                    "scrape_p99_ms": round(1000 * times[int(0.99 * len(times))], 2),
                    "scrape_max_ms": round(1000 * times[-1], 2),
                    "exporter_rss_mb": rss_mb(exporter.pid),
                },
                indent=2,
            )
        )
    finally:
        exporter.send_signal(signal.SIGTERM)
        exporter.wait(10)
        daemon.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
