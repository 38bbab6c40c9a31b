"""Where a policy leaves GPU capacity unallocated, and which pods it fails.

Replays one pod list with each policy (fgd given the list's workload, as in the paper; the others
as they run by default), keeping where each pod went, and prints JSON per policy: at the last event
of a column (--column, default 130: the end of the replay), the unallocated GPU capacity in
GPU-equivalents split into fully free GPUs (and how many of those sit on nodes whose free CPU is
below every GPU pod's request) and partly used GPUs by how much is free (200 milli or more free: a
GPU waiting for a partner of its share, an online packing's open GPUs, or one whose node has no CPU
or memory left for any share that fits it, counted apart as stranded); and, summed over
the seeds and divided by their number, the GPU-equivalents of the pods that failed before column
100, by kind (1x1000 = one whole GPU, share = any fraction of one GPU). Means over the seeds.
Usage: .venv/bin/python benchmarks/capacity_breakdown.py [--list multigpu20] [--seeds 42,43,44]
       [--policies fgd,packfrag] [--column 130] [--traces ../shared/traces/openb[,out/variants]]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence

from cluster_shapes import list_inputs
from fgd_table import OPENB_DIR

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.bound import column_events
from runtimekit.sim.replay import Cluster, Placed, replay, target_workload
from runtimekit.sim.runner import parse_seeds


def kind(pod: TracePod) -> str:
    if not pod.num_gpu:
        return "cpu"
    return f"{pod.num_gpu}x1000" if pod.gpu_milli >= 1000 else "share"


def state_at(
    nodes: Sequence[TraceNode], pods: Sequence[TracePod], where: Sequence[Placed], last: int
) -> dict[str, float]:
    """The unallocated GPU capacity after arrival `last`, from where each placed pod went. A partly
    used GPU with 200 milli or more free is "stranded" when no single-GPU share that has arrived and
    fits its free milli fits the node's free CPU and memory as well."""
    used: Counter[tuple[str, str]] = Counter()  # (node, GPU UUID) -> milli booked
    cpu: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    for placed in where:
        if placed.index > last:
            break
        cpu[placed.node] += pods[placed.index].cpu_milli
        memory[placed.node] += pods[placed.index].memory_mib
        for uuid, milli in placed.booked:
            used[(placed.node, uuid)] += milli
    arrived = pods[: last + 1]
    min_cpu = min((p.cpu_milli for p in arrived if p.num_gpu), default=0)
    shares = {(p.gpu_milli, p.cpu_milli, p.memory_mib) for p in arrived if p.num_gpu == 1 and p.gpu_milli < 1000}
    by_name = {n.name: n for n in nodes}
    on_node: Counter[str] = Counter(node for node, _ in used)
    fully_free = stranded = 0
    for n in nodes:
        idle = n.gpus - on_node[n.name]
        fully_free += idle
        if n.cpu_milli - cpu[n.name] < min_cpu:
            stranded += idle
    partly: list[int] = []
    open_stranded = 0
    for (node, _), milli in used.items():
        free = 1000 - milli
        if free <= 0:
            continue
        partly.append(free)
        cpu_left = by_name[node].cpu_milli - cpu[node]
        memory_left = by_name[node].memory_mib - memory[node]
        if free >= 200 and not any(m <= free and c <= cpu_left and mem <= memory_left for m, c, mem in shares):
            open_stranded += free

    def equivalents(low: int, high: int) -> float:
        return round(sum(f for f in partly if low <= f < high) / 1000, 1)

    return {
        "unallocated": round(fully_free + sum(partly) / 1000, 1),
        "fully_free": fully_free,
        "fully_free_cpu_used_up": stranded,
        "partly_used_0_99": equivalents(0, 100),
        "partly_used_100_199": equivalents(100, 200),
        "partly_used_200_up": equivalents(200, 1000),
        "partly_used_200_up_gpus": sum(1 for f in partly if f >= 200),
        "partly_used_200_up_stranded": round(open_stranded / 1000, 1),
    }


def failed_before(pods: Sequence[TracePod], arrived: Sequence[int], used: Sequence[int], capacity: int) -> Counter[str]:
    """GPU milli of the GPU pods that failed while what had arrived was at most the cluster's GPUs."""
    failed: Counter[str] = Counter()
    before = 0
    for pod, a, u in zip(pods, arrived, used, strict=True):
        if a > capacity:
            break
        if pod.total_gpu_milli and u == before:
            failed[kind(pod)] += pod.total_gpu_milli
        before = u
    return failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", default="multigpu20")
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--policies", default="fgd,packfrag")
    parser.add_argument("--column", type=int, default=130)
    parser.add_argument("--traces", default=str(OPENB_DIR))
    args = parser.parse_args()
    nodes, pods, _ = list_inputs(args.traces, args.list)
    cluster, workload = Cluster(nodes), target_workload(pods)
    total_gpus = sum(n.gpus for n in nodes)
    seeds = parse_seeds(args.seeds)
    out: dict[str, object] = {"list": args.list, "seeds": list(seeds), "column": args.column, "policies": {}}
    for policy in args.policies.split(","):
        failed: Counter[str] = Counter()
        states = []
        for seed in seeds:
            arrivals = build_arrivals(pods, nodes, seed, 1.3)
            result = replay(cluster, arrivals, policy, seed, workload if policy == "fgd" else None, record=True)
            events = column_events(result.arrived_milli, total_gpus, args.column)
            last = events[-1] if events else len(arrivals.pods) - 1
            states.append(state_at(nodes, arrivals.pods, result.where, last))
            failed += failed_before(arrivals.pods, result.arrived_milli, result.used_milli, total_gpus * 1000)
        out["policies"][policy] = {  # type: ignore[index]
            f"state_column_{args.column}": {k: round(sum(s[k] for s in states) / len(states), 1) for k in states[0]},
            "failed_before_column_100": {k: round(v / 1000 / len(seeds), 1) for k, v in failed.most_common()},
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
