"""In-process scheduling decisions per second (no HTTP): the real framework (allocate, gpushare
with a policy) over a StaticCache of N nodes x 8 GPUs, pods submitted in batches, one session per
batch, every pod placed (or found unschedulable) by the full predicate/score/device path.

The garbage collector runs with the thresholds the `runtimekit scheduler` process sets
(runtimekit.scheduler.collector); `--default-gc` keeps CPython's defaults instead.
Prints JSON. Target: >= 2,000 decisions/s at 5,000 nodes with fgd.
Usage: .venv/bin/python benchmarks/bench_scheduler_inprocess.py [--nodes 5000] [--pods 20000] [--batch 500]
       [--policy fgd] [--default-gc]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from contextlib import nullcontext

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
from runtimekit.sim.replay import target_workload
from runtimekit.sim.runner import DEFAULT_PODS, bundled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--default-gc", action="store_true", help="CPython's collector thresholds, not the scheduler's")
    args = parser.parse_args()
    trace = read_pod_list(bundled(DEFAULT_PODS))
    shares = [p for p in trace if p.num_gpu == 1 and 0 < p.gpu_milli < 1000]
    rng = random.Random(1)
    entries = [
        (
            NodeInventory.simulated(f"node-{i:05d}", "H200", 8),
            NodeCapacity(128000, 1 << 20, 256),
            NodeMeta(NodeName(f"node-{i:05d}"), gpu_model="H200"),
        )
        for i in range(args.nodes)
    ]
    cache = StaticCache(entries)
    conf = parse_conf(
        f'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n'
        f"    arguments: {{gpushare.policy: {args.policy}}}\n"
    )
    framework = Framework(conf, builtin_registry(), BuildContext(rng=random.Random(1)), explain=False)
    plugin = framework.plugin("gpushare")
    if args.policy == "fgd":
        plugin.set_workload(target_workload(trace))  # type: ignore[union-attr]
    requests = {}
    placed = sessions = 0
    started = time.perf_counter()
    session_times = []
    collector = nullcontext() if args.default_gc else fewer_collections()  # as `runtimekit scheduler` runs
    with collector:
        for start in range(0, args.pods, args.batch):
            for i in range(start, min(start + args.batch, args.pods)):
                pod = rng.choice(shares)
                request = requests.get(pod.gpu_milli)
                if request is None:
                    request = requests[pod.gpu_milli] = PodRequest(
                        pod.cpu_milli,
                        pod.memory_mib,
                        (ContainerGpuRequest("main", GpuRequest(GpuKind.SHARE, 1, pod.gpu_milli, 0)),),
                    )
                job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
                job.add(TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, request, created=float(i)))
                cache.add_job(job)
            t = time.perf_counter()
            framework.run_once(cache)
            session_times.append(time.perf_counter() - t)
            sessions += 1
            for key in list(cache.jobs):
                if PodKey(key) in cache.bound or PodKey(key) in cache.unschedulable:
                    placed += PodKey(key) in cache.bound
                    cache.remove_job(key)
        elapsed = time.perf_counter() - started  # before the old thresholds come back and collect
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "gpus": args.nodes * 8,
                "pods": args.pods,
                "batch": args.batch,
                "policy": args.policy,
                "gc": "default" if args.default_gc else "scheduler",
                "bound": placed,
                "sessions": sessions,
                "seconds": round(elapsed, 2),
                "decisions_per_second": round(args.pods / elapsed, 1),
                "session_seconds_p50": round(sorted(session_times)[len(session_times) // 2], 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
