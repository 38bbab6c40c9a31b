"""Benchmark the scheduler's /metrics as Queues come and go; prints one JSON object.

The scenario: a live scheduler (proportion in its conf) against the embedded API server, in this
process. QUEUES Queues are created and one pod is scheduled in the first of them, so a session has
worked out every queue's figures; /metrics is scraped. Then every Queue but that one is deleted
(one delete-collection) and, with no new pod and so no session, /metrics is scraped again as soon
as the scheduler's cache has seen the deletions, and once more SETTLE seconds later.

Reported per scrape (`with_queues`, `after_delete`, `settled`): `series` (sample lines),
`bytes` (the answer's size), `seconds` (one scrape, the best of three), `queue_series` (samples
labelled with a queue that no longer exists: 0 is the goal), and the config, the code version
and the machine.

Usage: python benchmarks/bench_deleted_queues.py [--queues 10000] [--settle 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, Endpoints, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.server import Scheduler

P = KitProtocol.default()
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: gpushare}]
"""


def node(name: str) -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, "H200", 8)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {P.labels.gpu_model: "H200"},
            "annotations": {P.annotations.node_devices: inventory.to_annotation()},
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def scrape(url: str, gone: set[str]) -> dict[str, Any]:
    best, text = float("inf"), ""
    for _ in range(3):
        began = time.perf_counter()
        text = httpx2.get(url, timeout=120).text
        best = min(best, time.perf_counter() - began)
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    stale = sum(1 for line in samples if 'queue_name="' in line and line.split('queue_name="')[1].split('"')[0] in gone)
    return {"series": len(samples), "bytes": len(text.encode()), "seconds": round(best, 4), "queue_series": stale}


def run(queues: int, settle: float) -> dict[str, Any]:
    with ApiServer(seed=1) as server:
        http = KubeHttp.connect(server=server.url)
        http.post("/api/v1/nodes", node("n1"))
        names = [f"q{i:05d}" for i in range(queues)]
        began = time.perf_counter()
        for name in names:
            http.post(
                QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}}
            )
        created_s = time.perf_counter() - began
        config = SchedulerConfig(
            kube=http,
            conf=parse_conf(CONF),
            protocol=P,
            keys=AssignmentKeys(required=False),
            endpoints=Endpoints(metrics="127.0.0.1:0"),
            period=0.02,
        )
        scheduler: Scheduler = build_scheduler(config).start()
        try:
            assert scheduler.synced(120)
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "p",
                    "namespace": "default",
                    "annotations": {"scheduling.volcano.sh/queue-name": names[0]},
                },
                "spec": {
                    "schedulerName": P.scheduler_name,
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {P.resources.gpu: 1}}}],
                },
            }
            http.post("/api/v1/namespaces/default/pods", pod)
            deadline = time.monotonic() + 120
            while not http.get("/api/v1/namespaces/default/pods/p")["spec"].get("nodeName"):
                assert time.monotonic() < deadline, "the pod was not scheduled"
                time.sleep(0.05)
            url = f"http://{scheduler.endpoints[0].address}/metrics"
            gone = set(names[1:])
            with_queues = scrape(url, set())
            sessions = scheduler.sessions
            began = time.perf_counter()
            for name in names[1:]:
                http.delete(f"{QUEUES}/{name}")
            deadline = time.monotonic() + 120
            while len(scheduler.cache.queues) > 3:  # the one left, plus default and root
                assert time.monotonic() < deadline, "the scheduler did not see the deletions"
                time.sleep(0.05)
            deleted_s = time.perf_counter() - began
            after_delete = scrape(url, gone)
            time.sleep(settle)
            settled = scrape(url, gone)
            return {
                "config": {"queues": queues, "settle_s": settle, "conf": "proportion"},
                "create_s": round(created_s, 2),
                "delete_seen_s": round(deleted_s, 2),
                "with_queues": with_queues,
                "after_delete": after_delete,
                "settled": settled,
                "sessions_after_delete": scheduler.sessions - sessions,
            }
        finally:
            scheduler.stop()
            http.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--settle", type=float, default=5.0)
    args = parser.parse_args()
    result = run(args.queues, args.settle)
    root = Path(__file__).resolve().parents[1]
    version = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"], check=False, capture_output=True, text=True
    )
    result["code_version"] = version.stdout.strip()
    result["machine"] = {"python": platform.python_version(), "cpus": len(__import__("os").sched_getaffinity(0))}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
