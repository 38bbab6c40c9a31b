"""MIG placement on a trace: the openb default pod list mapped to MIG slices, replayed on the openb
node list with every GPU an A100-80GB in dynamic MIG mode, with the mig plugin's `capacity` policy
against `firstfit` (the first free slot on the first node, in a random node order).

Mapping: a share of g milli-GPU asks for the smallest profile with at least that compute
(1g=1/7, 2g=2/7, 3g=3/7, 4g=4/7 of a GPU; 5/7 and above take the whole 7g); a pod of k whole GPUs
asks for k x 7g; CPU-only pods are left out. Arrivals: the list shuffled, resampled up to 130 % of
the cluster's compute slices. Prints JSON per policy and seed: slices placed (compute slices
allocated as % of all), pods placed and failed, at 100 % and 130 % of arrivals.
Usage: .venv/bin/python benchmarks/bench_mig.py [--seeds 42,43,44] [--pods FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import numpy as np

from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    MigMode,
    NodeCapacity,
    NodeInventory,
    PodKey,
    PodRequest,
)
from runtimekit.model.mig import geometry
from runtimekit.model.trace import TracePod, read_node_list, read_pod_list
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo, TaskStatus
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled

MODEL = "A100-80GB"
PROFILES = {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb", 4: "4g.40gb", 7: "7g.80gb"}


def mig_request(pod: TracePod) -> tuple[PodRequest, int] | None:
    if not pod.num_gpu or not pod.gpu_milli:
        return None
    if pod.gpu_milli >= 1000:
        slices, count = 7, pod.num_gpu
    else:
        need = -(-pod.gpu_milli * 7 // 1000)
        slices, count = (need if need <= 4 else 7), 1
    gpu = GpuRequest(GpuKind.MIG, count, 0, None, PROFILES[slices])
    return PodRequest(pod.cpu_milli, pod.memory_mib << 20, (ContainerGpuRequest("main", gpu),)), slices * count


def run(policy: str, seed: int, pods: list[TracePod], nodes_file: str) -> dict[str, object]:
    nodes = [n for n in read_node_list(nodes_file) if n.gpus]
    rng = np.random.default_rng(seed)
    entries = []
    for n in nodes:
        inventory = NodeInventory.simulated(n.name, MODEL, n.gpus, mig_mode=MigMode.DYNAMIC)
        entries.append(
            (inventory, NodeCapacity(n.cpu_milli, n.memory_mib << 20, 1001), NodeMeta(inventory.node, gpu_model=MODEL))
        )
    order = rng.permutation(len(entries))
    cache = StaticCache(entries, rank={e[0].node: int(order[i]) for i, e in enumerate(entries)}, share_table=True)
    conf = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: mig\n    arguments: {{mig.policy: {policy}}}\n'
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext(rng=random.Random(seed)), explain=False)
    mapped = [m for p in pods if (m := mig_request(p)) is not None]
    capacity = 7 * sum(n.gpus for n in nodes)
    sequence = [mapped[i] for i in rng.permutation(len(mapped))]
    total = sum(s for _, s in sequence)
    while total < 1.3 * capacity:
        pick = mapped[int(rng.integers(len(mapped)))]
        sequence.append(pick)
        total += pick[1]
    arrived = placed_slices = placed = failed = 0
    marks: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for i, (request, slices) in enumerate(sequence):
        job = JobInfo(JobKey(f"p{i}"), "default", f"p{i}", created=float(i))
        task = TaskInfo(PodKey(f"p{i}"), "default", f"p{i}", job.key, request, created=float(i))
        job.add(task)
        cache.add_job(job)
        framework.run_once(cache)
        cache.remove_job(job.key)
        arrived += slices
        if task.status is TaskStatus.BOUND:
            placed += 1
            placed_slices += slices
        else:
            failed += 1
        for mark in (100, 130):
            if str(mark) not in marks and arrived >= mark / 100 * capacity:
                marks[str(mark)] = {
                    "allocated_percent": round(100 * placed_slices / capacity, 2),
                    "pods_placed": placed,
                    "pods_failed": failed,
                }
    return {
        "policy": policy,
        "seed": seed,
        "compute_slices": capacity,
        "events": len(sequence),
        "at": marks,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--pods", default=str(bundled(DEFAULT_PODS)))
    parser.add_argument("--nodes", default=str(bundled(DEFAULT_NODES)))
    args = parser.parse_args()
    assert geometry(MODEL) is not None
    pods = read_pod_list(args.pods)
    runs = [
        run(policy, int(seed), pods, args.nodes)
        for seed in args.seeds.split(",")
        for policy in ("capacity", "firstfit")
    ]
    summary = {}
    for policy in ("capacity", "firstfit"):
        mine = [r for r in runs if r["policy"] == policy]
        summary[policy] = {
            mark: round(statistics.fmean(r["at"][mark]["allocated_percent"] for r in mine), 2)  # type: ignore[index]
            for mark in ("100", "130")
        }
    print(json.dumps({"model": MODEL, "summary_allocated_percent": summary, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
