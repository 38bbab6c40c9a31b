"""Where a policy leaves GPU capacity unallocated, and which pods it fails.

Replays one openb pod list with each policy (fgd given the list's workload, as in the paper; the
others as they run by default) and prints JSON per policy: at the end of the replay (column 130),
the unallocated GPU capacity in GPU-equivalents split into fully free GPUs (and how many of those
sit on nodes whose free CPU is below every GPU pod's request) and partly used GPUs by how much is
free; and, summed over the seeds and divided by their number, the GPU-equivalents of the pods that
failed before column 100, by kind (1x1000 = one whole GPU, share = any fraction of one GPU).
Usage: .venv/bin/python benchmarks/capacity_breakdown.py [--list multigpu20] [--seeds 42,43,44]
       [--policies fgd,packfrag] [--traces ../shared/traces/openb]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
from fgd_table import OPENB_DIR

from runtimekit.model.trace import TracePod, read_node_list, read_pod_list
from runtimekit.scheduler.cache import StaticCache
from runtimekit.sim import replay as replay_module
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.runner import parse_seeds


def kind(pod: TracePod) -> str:
    if not pod.num_gpu:
        return "cpu"
    return f"{pod.num_gpu}x1000" if pod.gpu_milli >= 1000 else "share"


def end_state(cache: StaticCache, pods: list[TracePod]) -> dict[str, float]:
    table = cache.ledger.table
    n = table.rows
    core = np.where(table.usable[:n], table.core_free[:n], 0).clip(min=0)
    min_cpu = min(p.cpu_milli for p in pods if p.num_gpu)
    stranded = table.cpu_free[:n] < min_cpu
    full = core == 1000
    partial = (core > 0) & (core < 1000)
    return {
        "unallocated": round(float(core.sum()) / 1000, 1),
        "fully_free": int(full.sum()),
        "fully_free_cpu_used_up": int(full[stranded].sum()),
        "partly_used_0_99": round(float(core[partial & (core < 100)].sum()) / 1000, 1),
        "partly_used_100_199": round(float(core[partial & (core >= 100) & (core < 200)].sum()) / 1000, 1),
        "partly_used_200_up": round(float(core[partial & (core >= 200)].sum()) / 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", default="multigpu20")
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--policies", default="fgd,packfrag")
    parser.add_argument("--traces", default=str(OPENB_DIR))
    args = parser.parse_args()
    traces = Path(args.traces)
    nodes = read_node_list(traces / "openb_node_list_gpu_node.csv")
    pods = read_pod_list(traces / f"openb_pod_list_{args.list}.csv")
    workload = replay_module.target_workload(pods)
    capacity = sum(n.gpus for n in nodes) * 1000
    seeds = parse_seeds(args.seeds)
    caches: list[StaticCache] = []
    build = replay_module.StaticCache

    def keep(*a: object, **k: object) -> StaticCache:
        cache = build(*a, **k)  # type: ignore[arg-type]
        caches.append(cache)
        return cache

    replay_module.StaticCache = keep  # type: ignore[assignment,misc]
    out: dict[str, object] = {"list": args.list, "seeds": list(seeds), "policies": {}}
    for policy in args.policies.split(","):
        failed: Counter[str] = Counter()
        states = []
        for seed in seeds:
            arrivals = build_arrivals(pods, nodes, seed, 1.3)
            result = replay_module.replay(nodes, arrivals, policy, seed, workload if policy == "fgd" else None)
            states.append(end_state(caches[-1], pods))
            before = 0
            for pod, arrived, used in zip(arrivals.pods, result.arrived_milli, result.used_milli, strict=True):
                if arrived > capacity:
                    break
                if pod.total_gpu_milli and used == before:
                    failed[kind(pod)] += pod.total_gpu_milli
                before = used
        out["policies"][policy] = {  # type: ignore[index]
            "end_state_column_130": {k: round(sum(s[k] for s in states) / len(states), 1) for k in states[0]},
            "failed_before_column_100": {k: round(v / 1000 / len(seeds), 1) for k, v in failed.most_common()},
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
