"""Wall time of one trace replay on the default openb list (seed 42, tune 1.3) for fgd, bestfit and
packfrag (the default policy).

Prints JSON. Each policy runs `--repeat` times in this process (after one warm-up of the imports);
min and median are reported, of wall time and of the process's CPU time (steadier than wall time
on a shared machine, where other processes take the cores for a while). Reading the lists, drawing
the arrivals and building the nodes into the node table happen once, before the runs, as
`runtimekit simulate` does them once for every seed and policy ("prepare_seconds"). Targets on a
2-core machine: fgd <= 3 s, bestfit <= 1 s.
Usage: .venv/bin/python benchmarks/bench_simulate.py [--repeat 3] [--pods FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from runtimekit.model.trace import read_node_list, read_pod_list
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.replay import Cluster, replay, target_workload
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pods", default=str(bundled(DEFAULT_PODS)))
    parser.add_argument("--nodes", default=str(bundled(DEFAULT_NODES)))
    parser.add_argument("--policies", default="fgd,bestfit,packfrag")
    args = parser.parse_args()
    nodes, pods = read_node_list(args.nodes), read_pod_list(args.pods)
    started = time.perf_counter()
    arrivals = build_arrivals(pods, nodes, 42, 1.3)
    workload = target_workload(pods)
    cluster = Cluster(nodes)
    prepare = time.perf_counter() - started
    out: dict[str, object] = {
        "pods_file": args.pods,
        "seed": 42,
        "tune": 1.3,
        "events": len(arrivals.pods),
        "prepare_seconds": round(prepare, 3),
    }
    for policy in args.policies.split(","):
        times, cpu = [], []
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            result = replay(cluster, arrivals, policy, 42, workload)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        out[policy] = {
            "min_seconds": round(min(times), 3),
            "median_seconds": round(statistics.median(times), 3),
            "min_cpu_seconds": round(min(cpu), 3),
            "median_cpu_seconds": round(statistics.median(cpu), 3),
            "runs": len(times),
            "column_130": result.columns["130"],
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
