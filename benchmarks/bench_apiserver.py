"""Benchmark the embedded API server at cluster scale; prints one JSON object.

Starts `runtimekit apiserver` as a subprocess (so its RSS and CPU are its own), creates NODES nodes
and PODS pods of realistic size (labels, annotations with a GPU inventory or assignment and a
last-applied configuration, containers with resources and env, status with conditions) over HTTP
with aiohttp, while one watcher follows the pods. Then measures, through a real HTTP client:
- create throughput (objects/s, CONCURRENCY requests in flight);
- list latency of all pods and all nodes (p50 of REPS, time to the last byte), and paging with limit=500;
- watch events/s delivered to one watcher: live (during the pod creates) and replaying the whole
  history from an old resourceVersion (the server sends as fast as the client reads), and in total
  to FAN_OUT watchers replaying it at once;
- the server's RSS after loading, and its CPU time per pod create and per full pod list (rates on a
  shared machine depend on its load; the load average is reported too).

Usage: python benchmarks/bench_apiserver.py [--nodes 5000] [--pods 50000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol

PROTOCOL = KitProtocol.default()
CONCURRENCY = 32
FAN_OUT = 4
CONTINUE = re.compile(rb'"continue":"([^"]+)"')
PODS_PATH = "/api/v1/namespaces/default/pods"


def node_manifest(i: int) -> dict[str, Any]:
    name = f"gpu-node-{i:05d}"
    inventory = NodeInventory.simulated(name, "A100-80GB", 8)
    images = [
        {"names": [f"registry.example.com/team/image-{k}:v{k}.0"], "sizeBytes": 100_000_000 + k} for k in range(12)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "gpu-8x-a100",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                PROTOCOL.labels.gpu_model: "A100-80GB",
                PROTOCOL.labels.gpu_count: "8",
                PROTOCOL.labels.enable: "true",
            },
            "annotations": {PROTOCOL.annotations.node_devices: inventory.to_annotation()},
        },
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24", "providerID": f"sim://{name}"},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056Gi", "pods": "110", PROTOCOL.resources.gpu: "8"},
            "allocatable": {"cpu": "95", "memory": "1050Gi", "pods": "110", PROTOCOL.resources.gpu: "8"},
            "conditions": [
                {"type": t, "status": "False", "reason": f"No{t}", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ]
            + [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.0",
                "osImage": "Ubuntu 22.04",
                "containerRuntimeVersion": "containerd://1.7",
            },
            "images": images,
        },
    }


def pod_manifest(i: int, nodes: int) -> dict[str, Any]:
    name = f"job-{i // 8:05d}-worker-{i % 8}"
    node = f"gpu-node-{i % nodes:05d}"
    share = GpuShare(GpuUUID(f"GPU-{i:08d}"), i % 8, 250, 10_240)
    assignment = Assignment(NodeName(node), {"trainer": (share,)}, "fgd")
    env = [{"name": f"ENV_VAR_{k}", "value": f"value-{k}-" + "x" * 20} for k in range(12)]
    container = {
        "name": "trainer",
        "image": "registry.example.com/ml/trainer:2.3.1",
        "command": ["python", "-m", "trainer"],
        "args": ["--epochs=10", "--batch-size=64", f"--shard={i}"],
        "env": env,
        "resources": {
            "requests": {"cpu": "4", "memory": "16Gi", PROTOCOL.resources.core: "25", PROTOCOL.resources.memory: "10"},
            "limits": {"cpu": "4", "memory": "16Gi", PROTOCOL.resources.core: "25", PROTOCOL.resources.memory: "10"},
        },
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}],
        "ports": [{"containerPort": 8080, "name": "metrics"}],
    }
    last_applied = json.dumps({"kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "trainer", "job": f"job-{i // 8:05d}", "team": f"team-{i % 20}", "tier": "batch"},
            "annotations": {
                PROTOCOL.annotations.assignment: assignment.to_annotation(),
                PROTOCOL.annotations.assume_time: str(1_700_000_000 + i),
                "kubectl.kubernetes.io/last-applied-configuration": last_applied,
            },
        },
        "spec": {
            "schedulerName": PROTOCOL.scheduler_name,
            "nodeName": node,
            "containers": [container],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def start_server(history: int) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "runtimekit.cli.main", "--log-level", "WARNING", "apiserver", "--port", "0"]
    # the replays read the whole history back: keep all of it, whatever its size in bytes
    bounds = ["--history-size", str(history), "--history-bytes", str(2**40)]
    process = subprocess.Popen([*command, *bounds], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (load-independent, unlike rates on a shared machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def create_all(session: aiohttp.ClientSession, url: str, path: str, bodies: list[bytes]) -> float:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    headers = {"Content-Type": "application/json"}

    async def worker() -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with session.post(url + path, data=body, headers=headers) as response:
                if response.status != 201:
                    raise RuntimeError(f"create failed: {response.status} {await response.text()}")
                await response.read()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return len(bodies) / (time.perf_counter() - start)


async def watch_count(session: aiohttp.ClientSession, url: str, rv: str, expected: int) -> tuple[int, float]:
    """Read `expected` pod events from `rv`; (events, seconds from the first to the last)."""
    params = {"watch": "true", "resourceVersion": rv}
    count, first = 0, 0.0
    async with session.get(url + PODS_PATH, params=params, timeout=aiohttp.ClientTimeout(total=None)) as response:
        async for _line in response.content:
            if count == 0:
                first = time.perf_counter()
            count += 1
            if count >= expected:
                break
    return count, time.perf_counter() - first


async def timed_get(
    session: aiohttp.ClientSession, url: str, params: dict[str, str] | None = None
) -> tuple[float, bytes]:
    seconds, _first, body = await timed_get_ttfb(session, url, params)
    return seconds, body


async def timed_get_ttfb(
    session: aiohttp.ClientSession, url: str, params: dict[str, str] | None = None
) -> tuple[float, float, bytes]:
    """(seconds to the last byte, seconds to the response headers, body)."""
    start = time.perf_counter()
    async with session.get(url, params=params) as response:
        first = time.perf_counter() - start
        body = await response.read()
    return time.perf_counter() - start, first, body


async def paged(session: aiohttp.ClientSession, url: str) -> tuple[float, list[float], int]:
    """Walk all pages of limit=500; the client only finds the continue token (no JSON parse)."""
    pages: list[float] = []
    token, items = "", 0
    start = time.perf_counter()
    while True:
        params = {"limit": "500", **({"continue": token} if token else {})}
        seconds, body = await timed_get(session, url, params)
        pages.append(seconds)
        items += body.count(b'{"kind":"Pod",')
        found = CONTINUE.search(body[:1024])
        token = found.group(1).decode() if found else ""
        if not token:
            return time.perf_counter() - start, pages, items


async def fan_out(session: aiohttp.ClientSession, url: str, rv: str, expected: int, watchers: int) -> float:
    """Events/s delivered in total to `watchers` watchers replaying the same history at once."""
    start = time.perf_counter()
    counts = await asyncio.gather(*(watch_count(session, url, rv, expected) for _ in range(watchers)))
    return sum(count for count, _ in counts) / (time.perf_counter() - start)


async def bench(nodes: int, pods: int, reps: int) -> dict[str, Any]:
    process, url = start_server(history=max(100_000, nodes + pods + 1000))
    try:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY + 4)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
            node_bodies = [json.dumps(node_manifest(i)).encode() for i in range(nodes)]
            pod_bodies = [json.dumps(pod_manifest(i, nodes)).encode() for i in range(pods)]
            node_rate = await create_all(session, url, "/api/v1/nodes", node_bodies)
            rv = json.loads((await timed_get(session, url + PODS_PATH))[1])["metadata"]["resourceVersion"]
            live = asyncio.create_task(watch_count(session, url, rv, pods))
            cpu_before = cpu_seconds(process.pid)
            pod_rate = await create_all(session, url, PODS_PATH, pod_bodies)
            live_events, live_seconds = await live
            cpu_creates = cpu_seconds(process.pid) - cpu_before
            replay_events, replay_seconds = await watch_count(session, url, rv, pods)
            fanout_rate = await fan_out(session, url, rv, pods, FAN_OUT)
            memory = rss_mb(process.pid)
            cpu_before = cpu_seconds(process.pid)
            pod_lists = [await timed_get_ttfb(session, url + PODS_PATH) for _ in range(reps)]
            cpu_lists = cpu_seconds(process.pid) - cpu_before
            node_lists = [await timed_get(session, url + "/api/v1/nodes") for _ in range(reps)]
            paging = await paged(session, url + PODS_PATH)
            return {
                "benchmark": "apiserver",
                "nodes": nodes,
                "pods": pods,
                "node_json_bytes_avg": round(statistics.mean(len(b) for b in node_bodies)),
                "pod_json_bytes_avg": round(statistics.mean(len(b) for b in pod_bodies)),
                "create_nodes_per_s": round(node_rate),
                "create_pods_per_s": round(pod_rate),
                "create_concurrency": CONCURRENCY,
                "watch_live_events": live_events,
                "watch_live_events_per_s": round(live_events / live_seconds),
                "watch_replay_events_per_s": round(replay_events / replay_seconds),
                f"watch_replay_fanout_{FAN_OUT}_watchers_total_events_per_s": round(fanout_rate),
                "server_cpu_us_per_pod_create": round(cpu_creates / pods * 1e6),
                "list_all_pods_p50_s": round(statistics.median(s for s, _, _ in pod_lists), 3),
                "list_all_pods_first_byte_p50_s": round(statistics.median(f for _, f, _ in pod_lists), 3),
                "list_all_pods_server_cpu_s": round(cpu_lists / reps, 3),
                "list_all_pods_mb": round(len(pod_lists[0][2]) / 1e6, 1),
                "list_all_nodes_p50_s": round(statistics.median(s for s, _ in node_lists), 3),
                "list_pods_paged_limit500_total_s": round(paging[0], 3),
                "list_pods_paged_limit500_page_p50_s": round(statistics.median(paging[1]), 4),
                "list_pods_paged_items": paging[2],
                "server_rss_mb": round(memory),
                "reps": reps,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(bench(args.nodes, args.pods, args.reps)), indent=2))


if __name__ == "__main__":
    main()
