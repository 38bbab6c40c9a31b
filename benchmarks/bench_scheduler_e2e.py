"""End-to-end scheduling throughput and latency on the embedded cluster.

Starts the embedded API server and `runtimekit scheduler` as separate processes, registers N nodes
of 8 simulated H200 GPUs, then creates share pods (sizes from the openb trace) from several client
threads at a target rate, and watches them: a pod's arrival is when the API server acknowledged its
creation, its binding is when the watch shows `spec.nodeName`. Prints JSON with pods bound per
second (from the first arrival to the last binding) and the p50/p99 arrival-to-binding latency, and
the CPU each process used per pod while pods came and went (scheduler, API server, and this client,
which creates the pods and watches them), so the process that limits the rate shows. The clock
starts once the scheduler has synced the nodes (its CPU goes quiet), and the JSON gives each
process's resident memory with every pod bound.
Targets (1,000 nodes, 10,000 pods): >= 300 pods/s, p99 <= 1 s.
Usage: .venv/bin/python benchmarks/bench_scheduler_e2e.py [--nodes 1000] [--pods 10000] [--rate 330] [--policy fgd]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from e2e_harness import apiserver, cpu_seconds, own_cpu_seconds, scheduler

from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeInventory
from runtimekit.model.trace import read_pod_list
from runtimekit.protocol import KitProtocol
from runtimekit.sim.runner import DEFAULT_PODS, bundled

P = KitProtocol.default()


def node(name: str) -> dict[str, object]:
    inventory = NodeInventory.simulated(name, "H200", 8)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {P.labels.gpu_model: "H200", P.labels.gpu_count: "8"},
            "annotations": {P.annotations.node_devices: inventory.to_annotation()},
        },
        "status": {
            "allocatable": {"cpu": "192", "memory": "2Ti", "pods": "256"},
            "capacity": {"cpu": "192", "memory": "2Ti", "pods": "256"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, core: int, cpu_milli: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "limits": {P.resources.core: core},
                        "requests": {"cpu": f"{cpu_milli}m", "memory": "1Gi"},
                    },
                }
            ],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=330.0, help="pod creations per second (0 = as fast as possible)")
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    with apiserver() as (url, server_pid):
        http = KubeHttp.connect(server=url, timeout=60)
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: http.post("/api/v1/nodes", node(f"node-{i:05d}")), range(args.nodes)))
        nodes_seconds = time.perf_counter() - started
        conf = (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: gpushare\n'
            f"    arguments: {{gpushare.policy: {args.policy}}}\n"
        )
        with scheduler(url, conf) as process:
            result = measure(args, http, url, nodes_seconds, {"scheduler": process.pid, "apiserver": server_pid})
            if process.poll() is not None:  # a figure without a scheduler would be a silent zero
                raise SystemExit(f"the scheduler exited with status {process.returncode}; no figure")
            return result


def wait_quiet(pid: int, limit: float = 300.0) -> float:
    """Wait until the scheduler has listed and booked every node: its CPU use stays under a tenth of a
    core for a second (at 5,000 nodes the sync takes several seconds; counted in the window, it would be
    charged to the pods). Returns the seconds waited."""
    started = time.perf_counter()
    used = cpu_seconds(pid)
    while time.perf_counter() - started < limit:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        if now - used < 0.1:
            break
        used = now
    return round(time.perf_counter() - started, 1)


def rss_mib(pid: int) -> dict[str, float]:
    """A live process's resident memory now and at its peak, MiB (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: round(int(fields[name].split()[0]) / 1024, 1) for key, name in (("now", "VmRSS"), ("peak", "VmHWM"))}


def measure(args: argparse.Namespace, http: KubeHttp, url: str, nodes_seconds: float, pids: dict[str, int]) -> int:
    trace = [p for p in read_pod_list(bundled(DEFAULT_PODS)) if p.num_gpu == 1 and 0 < p.gpu_milli < 1000]
    rng = random.Random(7)
    shapes = [(max(1, p.gpu_milli // 10), p.cpu_milli) for p in rng.choices(trace, k=args.pods)]
    arrived: dict[str, float] = {}
    bound: dict[str, float] = {}
    done = threading.Event()
    _, rv = http.list("/api/v1/namespaces/default/pods")

    def watch() -> None:
        watcher = KubeHttp.connect(server=url, timeout=60)
        version = rv
        while not done.is_set():
            for event in watcher.watch("/api/v1/namespaces/default/pods", version, timeout_seconds=60):
                meta = event.object.get("metadata") or {}
                version = meta.get("resourceVersion", version)
                name = meta.get("name", "")
                if event.type == "MODIFIED" and (event.object.get("spec") or {}).get("nodeName") and name not in bound:
                    bound[name] = time.perf_counter()
                    if len(bound) >= args.pods:
                        done.set()
                        return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    time.sleep(3.0)
    synced_after = wait_quiet(pids["scheduler"])
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()} | {"client": own_cpu_seconds()}
    first = time.perf_counter()
    interval = 1.0 / args.rate if args.rate > 0 else 0.0

    def create(i: int) -> None:
        if interval:
            delay = first + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        core, cpu = shapes[i]
        http.post("/api/v1/namespaces/default/pods", pod(f"p{i:05d}", core, cpu))
        arrived[f"p{i:05d}"] = time.perf_counter()

    with ThreadPoolExecutor(args.clients) as pool:
        list(pool.map(create, range(args.pods)))
    created = time.perf_counter()
    done.wait(max(60.0, args.pods / 50))
    cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()} | {"client": own_cpu_seconds()}
    memory = {name: rss_mib(pid) for name, pid in pids.items()}
    # the scheduler's Scheduled Events go through a rate limiter, so a slower run posts more of them per
    # pod and charges the API server more per pod: report them so runs of different speed compare
    events, _ = http.list("/api/v1/namespaces/default/events")
    last = max(bound.values()) if bound else time.perf_counter()
    latencies = sorted(bound[n] - arrived[n] for n in bound if n in arrived)

    def pct(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3) if latencies else -1.0

    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "gpus": args.nodes * 8,
                "pods": args.pods,
                "policy": args.policy,
                "target_rate": args.rate,
                "created_per_second": round(args.pods / (created - first), 1),
                "bound": len(bound),
                "bound_per_second": round(len(bound) / (last - first), 1),
                "latency_p50_seconds": pct(0.50),
                "latency_p99_seconds": pct(0.99),
                "latency_max_seconds": pct(1.0),
                "register_nodes_seconds": round(nodes_seconds, 2),
                "scheduler_sync_wait_seconds": synced_after,
                "events_per_pod": round(len(events) / args.pods, 3),
                "cpu_ms_per_pod": {n: round((cpu_after[n] - cpu_before[n]) * 1000 / args.pods, 2) for n in cpu_after},
                "rss_mib_with_pods_bound": memory,
            },
            indent=2,
        )
    )
    return 0 if len(bound) == args.pods else 1


if __name__ == "__main__":
    sys.exit(main())
