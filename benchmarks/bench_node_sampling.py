"""Volcano's feasible-node limit (--percentage-nodes-to-find and its minimums) and the scheduler's
metrics, in process: the same pod stream over N nodes x 8 GPUs, placed by the real framework once
per variant, each on a fresh cache:

- `unset`: no limit (the scheduler's default): the reference placements;
- `metrics`: no limit, with Volcano's metrics observing (their cost; placements must not change);
- `percent-100`: the limit at 100 % (every feasible node: placements must not change);
- `adaptive`, `percent-N`: the limit as Volcano applies it (fewer nodes scored: faster, and
  placements that may differ).
For each: decisions per CPU second of the process, pods placed, GPU compute allocated, GPUs left
whole, and how many pods went to another node than in `unset`. Prints JSON.
Usage: .venv/bin/python benchmarks/bench_node_sampling.py [--nodes 2000] [--pods 8000] [--batch 500]
       [--policy packfrag] [--percentages 0,10,50]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
    PodRequest,
)
from runtimekit.model.trace import read_pod_list
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.collector import fewer_collections
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.sampling import NodeSampler, NodeSampling
from runtimekit.scheduler.metrics.observer import SchedulerMetrics
from runtimekit.sim.runner import DEFAULT_PODS, bundled


def stream(pods: int) -> list[PodRequest]:
    trace = read_pod_list(bundled(DEFAULT_PODS))
    shaped = [p for p in trace if p.num_gpu >= 1]
    rng = random.Random(1)
    out = []
    for _ in range(pods):
        pod = rng.choice(shaped)
        kind = GpuKind.SHARE if pod.num_gpu == 1 and pod.gpu_milli < 1000 else GpuKind.WHOLE
        gpu = GpuRequest(kind, pod.num_gpu, pod.gpu_milli if kind is GpuKind.SHARE else 1000, 0)
        out.append(PodRequest(pod.cpu_milli, pod.memory_mib << 20, (ContainerGpuRequest("main", gpu),)))
    return out


def run(nodes: int, requests: list[PodRequest], batch: int, policy: str, variant: str) -> dict[str, Any]:
    entries = [
        (
            NodeInventory.simulated(f"node-{i:05d}", "H200", 8),
            NodeCapacity(128000, 1 << 40, 256),
            NodeMeta(NodeName(f"node-{i:05d}"), gpu_model="H200"),
        )
        for i in range(nodes)
    ]
    cache = StaticCache(entries)
    conf = parse_conf(
        f'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: gpushare\n'
        f"    arguments: {{gpushare.policy: {policy}}}\n"
    )
    framework = Framework(conf, builtin_registry(), BuildContext(rng=random.Random(1)), explain=False)
    if variant == "metrics":
        framework.observer = SchedulerMetrics()
    elif variant == "adaptive":
        framework.sampler = NodeSampler(NodeSampling(0))
    elif variant.startswith("percent-"):
        framework.sampler = NodeSampler(NodeSampling(int(variant.split("-")[1])))
    placements: dict[str, str] = {}
    started = time.process_time()  # CPU seconds: other processes on the machine do not count
    with fewer_collections():
        for start in range(0, len(requests), batch):
            for i in range(start, min(start + batch, len(requests))):
                job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
                job.add(TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, requests[i], created=float(i)))
                cache.add_job(job)
            framework.run_once(cache)
            for key in list(cache.jobs):
                task = cache.bound.get(PodKey(key))
                if task is not None or PodKey(key) in cache.unschedulable:
                    placements[key] = str(task.node) if task is not None else ""
                    cache.remove_job(key)
        elapsed = time.process_time() - started
    table = cache.ledger.table
    rows = table.active_rows()
    usable = table.usable[rows]
    core = table.core_free[rows]
    free = int(core[usable].clip(min=0).sum())
    total = int(usable.sum()) * 1000
    whole_free = int((usable & (core == 1000) & (table.gmem_free[rows] == table.gmem_total[rows])).sum())
    return {
        "variant": variant,
        "decisions_per_cpu_second": round(len(requests) / elapsed, 1),
        "placed": sum(1 for node in placements.values() if node),
        "gpu_allocated": round(1 - free / total, 4),
        "gpus_whole_free": whole_free,  # what is left for whole-GPU pods: packing keeps it high
        "placements": placements,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--policy", default="packfrag")
    parser.add_argument("--percentages", default="0,10,50")
    args = parser.parse_args()
    requests = stream(args.pods)
    variants = ["unset", "metrics", "percent-100"]
    variants += ["adaptive" if p == "0" else f"percent-{p}" for p in args.percentages.split(",") if p]
    results = [run(args.nodes, requests, args.batch, args.policy, v) for v in variants]
    reference = results[0]["placements"]
    for result in results:
        placements = result.pop("placements")
        result["pods_on_another_node_than_unset"] = sum(1 for k, n in placements.items() if reference.get(k) != n)
        result["nodes_scored_per_task"] = (
            NodeSampling(0 if result["variant"] == "adaptive" else int(result["variant"].split("-")[1])).count(
                args.nodes
            )
            if result["variant"] == "adaptive" or result["variant"].startswith("percent-")
            else args.nodes
        )
    print(json.dumps({"nodes": args.nodes, "pods": args.pods, "policy": args.policy, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
