"""In-process scheduling decisions per second (no HTTP): the real framework (allocate, gpushare
with a policy) over a StaticCache of N nodes x 8 GPUs, pods submitted in batches, one session per
batch, every pod placed (or found unschedulable) by the full predicate/score/device path.

`--kube` adds the predicates and nodeorder plugins (kube-scheduler's filters and scores) to the
conf; `--affinity` (implies `--kube`) makes the pods training jobs of `--job-size` workers, each
worker one per node by required pod anti-affinity on kubernetes.io/hostname and spread over zones
of 100 nodes by a DoNotSchedule topology spread constraint (maxSkew 1); every node carries the
hostname and zone labels in all modes. `--plain` makes every pod ask 100m CPU and 500Mi and no GPU,
as the pod of kube-scheduler's SchedulingBasic workload does. `--like-e2e` makes the pods and the conf
those of `bench_scheduler_e2e.py`: predicates and gpushare, each pod the trace's CPU, 1Gi and a share
whose GPU memory follows its compute share (so the GPU fit reads every GPU), fgd learning its
workload from the pods; with `--batch 50` its sessions are about the size the live scheduler's are.

The garbage collector runs with the thresholds the `runtimekit scheduler` process sets
(runtimekit.scheduler.collector); `--default-gc` keeps CPython's defaults instead.
Prints JSON (decisions per second of wall time and per second of this process's CPU time, the
steadier figure on a shared host). Targets at 5,000 nodes with fgd: >= 4,000 decisions/s for pods without affinity;
>= 1,000 decisions/s with `--affinity`.
Usage: .venv/bin/python benchmarks/bench_scheduler_inprocess.py [--nodes 5000] [--pods 20000] [--batch 500]
       [--policy fgd] [--kube] [--affinity [--job-size 10]] [--plain] [--like-e2e] [--default-gc]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from contextlib import nullcontext
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
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.collector import fewer_collections
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
from runtimekit.sim.replay import target_workload
from runtimekit.sim.runner import DEFAULT_PODS, bundled

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def worker(job: str) -> dict[str, Any]:
    """A training job's worker: one per node, spread evenly over zones."""
    selector = {"matchLabels": {"job": job}}
    return {
        "metadata": {"name": job, "namespace": "default", "labels": {"job": job}},
        "spec": {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": selector, "topologyKey": HOSTNAME}
                    ]
                }
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
            ],
        },
    }


def broken_jobs(cache: StaticCache, zones: int) -> int:
    """Jobs with two workers on one node, or with zones (of `zones`) whose worker counts differ by
    more than 1: what the anti-affinity and the spread constraint forbid."""
    nodes: dict[str, list[str]] = {}
    for task in cache.bound.values():
        nodes.setdefault(str(task.job), []).append(str(task.node))
    broken = 0
    for placed in nodes.values():
        per_zone = Counter(int(node[len("node-") :]) // 100 for node in placed)
        fewest = min(per_zone.values()) if len(per_zone) == zones else 0
        broken += len(set(placed)) != len(placed) or max(per_zone.values()) - fewest > 1
    return broken


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--default-gc", action="store_true", help="CPython's collector thresholds, not the scheduler's")
    parser.add_argument("--kube", action="store_true", help="the predicates and nodeorder plugins too")
    parser.add_argument("--affinity", action="store_true", help="jobs one worker per node, spread over zones")
    parser.add_argument("--job-size", type=int, default=10, help="workers per job (--affinity); divides --batch")
    parser.add_argument(
        "--plain", action="store_true", help="every pod asks 100m CPU and 500Mi, no GPU (SchedulingBasic's pod)"
    )
    parser.add_argument("--like-e2e", action="store_true", help="bench_scheduler_e2e.py's pods and conf")
    args = parser.parse_args()
    kube = args.kube or args.affinity
    if args.affinity and args.batch % args.job_size:
        parser.error("--job-size must divide --batch (a session sees whole jobs)")
    trace = read_pod_list(bundled(DEFAULT_PODS))
    shares = [p for p in trace if p.num_gpu == 1 and 0 < p.gpu_milli < 1000]
    rng = random.Random(1)
    entries = [
        (
            NodeInventory.simulated(f"node-{i:05d}", "H200", 8),
            NodeCapacity(128000, 1 << 40, 256),
            NodeMeta(
                NodeName(f"node-{i:05d}"),
                labels={HOSTNAME: f"node-{i:05d}", ZONE: f"zone-{i // 100:03d}"},
                gpu_model="H200",
            ),
        )
        for i in range(args.nodes)
    ]
    cache = StaticCache(entries)
    kube_plugins = "  - name: predicates\n  - name: nodeorder\n" if kube else ""
    if args.like_e2e:
        kube_plugins = "  - name: predicates\n"
    conf = parse_conf(
        f'actions: "allocate"\ntiers:\n- plugins:\n{kube_plugins}  - name: gpushare\n'
        f"    arguments: {{gpushare.policy: {args.policy}}}\n"
    )
    workload = target_workload(trace) if args.policy == "fgd" and not args.like_e2e else None
    framework = build_framework(FrameworkConfig(conf, seed=1, workload=workload, explain=False))
    requests = {}
    placed = sessions = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    session_times = []
    collector = nullcontext() if args.default_gc else fewer_collections()  # as `runtimekit scheduler` runs
    with collector:
        for start in range(0, args.pods, args.batch):
            for i in range(start, min(start + args.batch, args.pods)):
                pod = rng.choice(shares)
                request = requests.get(-1 if args.plain else (pod.gpu_milli, pod.cpu_milli if args.like_e2e else 0))
                if request is None and args.plain:
                    request = requests[-1] = PodRequest(100, 500 << 20)
                elif request is None and args.like_e2e:  # as bench_scheduler_e2e.py's pods read
                    share = GpuRequest(GpuKind.SHARE, 1, max(1, pod.gpu_milli // 10) * 10, None)
                    request = requests[(pod.gpu_milli, pod.cpu_milli)] = PodRequest(
                        pod.cpu_milli, 1 << 30, (ContainerGpuRequest("main", share),)
                    )
                elif request is None:
                    request = requests[(pod.gpu_milli, 0)] = PodRequest(
                        pod.cpu_milli,
                        pod.memory_mib << 20,
                        (ContainerGpuRequest("main", GpuRequest(GpuKind.SHARE, 1, pod.gpu_milli, 0)),),
                    )
                if not args.affinity:
                    job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
                    job.add(TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, request, created=float(i)))
                    cache.add_job(job)
                    continue
                name = f"j{i // args.job_size}"
                job = cache.jobs.get(JobKey(name)) or JobInfo(
                    JobKey(name), "default", name, min_member=args.job_size, created=float(i)
                )
                job.add(
                    TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, request, created=float(i), pod=worker(name))
                )
                cache.jobs[job.key] = job
            t = time.perf_counter()
            framework.run_once(cache)
            session_times.append(time.perf_counter() - t)
            sessions += 1
            for key, job in list(cache.jobs.items()):
                keys = list(job.tasks)
                if all(k in cache.bound or k in cache.unschedulable for k in keys):
                    placed += sum(k in cache.bound for k in keys)
                    cache.remove_job(key)
        elapsed = time.perf_counter() - started  # before the old thresholds come back and collect
        cpu = time.process_time() - cpu_started
    broken = broken_jobs(cache, -(-args.nodes // 100)) if args.affinity else 0
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "gpus": args.nodes * 8,
                "pods": args.pods,
                "batch": args.batch,
                "policy": args.policy,
                "plugins": "predicates, nodeorder, gpushare"
                if kube
                else "predicates, gpushare"
                if args.like_e2e
                else "gpushare",
                "pods_with": f"anti-affinity one per node, zone spread, jobs of {args.job_size}"
                if args.affinity
                else "-",
                "pod_request": "100m CPU, 500Mi, no GPU"
                if args.plain
                else "as bench_scheduler_e2e.py's"
                if args.like_e2e
                else "GPU shares from the openb trace",
                "gc": "default" if args.default_gc else "scheduler",
                "bound": placed,
                "sessions": sessions,
                "seconds": round(elapsed, 2),
                "decisions_per_second": round(args.pods / elapsed, 1),
                "cpu_seconds": round(cpu, 2),  # this process's CPU time: steadier than the wall on a busy host
                "decisions_per_cpu_second": round(args.pods / cpu, 1),
                "jobs_breaking_their_constraints": broken,
                "session_seconds_p50": round(sorted(session_times)[len(session_times) // 2], 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
