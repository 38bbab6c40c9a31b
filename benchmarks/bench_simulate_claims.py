"""Replay time per pod through ResourceClaims (`runtimekit simulate --through-claims`) against the
device-plugin path, on the first `--nodes-count` nodes of the openb GPU node list (seed 42, tune 1.3).

Prints JSON: per policy the seconds of one replay each way, the time per arriving pod (µs) each way,
their ratio, and whether the two placed the same pods on the same nodes and GPUs with the same
columns. The nodes and their ResourceSlices are built once beforehand (as `runtimekit simulate` does
for all its seeds and policies). The claim path runs the structured allocator on every node a pod
could go to, so its cost per pod grows with the nodes (not with the claims allocated: what they hold
is kept per pool, read again only for the claims that changed); the full list is for patient runs.
Usage: .venv/bin/python benchmarks/bench_simulate_claims.py [--nodes-count 40] [--policies bestfit,fgd,packfrag]
"""

from __future__ import annotations

import argparse
import json
import time

from runtimekit.cli.sim_dra import kit_publication
from runtimekit.model.trace import read_node_list, read_pod_list
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.replay import Cluster, replay, target_workload
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes-count", type=int, default=40)
    parser.add_argument("--pods", default=str(bundled(DEFAULT_PODS)))
    parser.add_argument("--nodes", default=str(bundled(DEFAULT_NODES)))
    parser.add_argument("--policies", default="bestfit,fgd,packfrag")
    args = parser.parse_args()
    nodes, pods = read_node_list(args.nodes)[: args.nodes_count], read_pod_list(args.pods)
    arrivals = build_arrivals(pods, nodes, 42, 1.3)
    workload = target_workload(pods)
    cluster = Cluster(nodes)
    publication = kit_publication()
    started = time.perf_counter()
    cluster.slices(publication)
    out: dict[str, object] = {
        "pods_file": args.pods,
        "nodes": len(nodes),
        "gpus": cluster.total_gpus,
        "seed": 42,
        "tune": 1.3,
        "events": len(arrivals.pods),
        "slices_seconds": round(time.perf_counter() - started, 3),
    }
    count = len(arrivals.pods)
    replay(cluster, arrivals, "bestfit", 42, workload)  # warm-up: imports and first-call costs
    for policy in args.policies.split(","):
        started = time.perf_counter()
        devices = replay(cluster, arrivals, policy, 42, workload, record=True)
        device_seconds = time.perf_counter() - started
        started = time.perf_counter()
        claims = replay(cluster, arrivals, policy, 42, workload, claims=publication, record=True)
        claim_seconds = time.perf_counter() - started
        same = [(p.index, p.node, p.gpus) for p in claims.where] == [(p.index, p.node, p.gpus) for p in devices.where]
        out[policy] = {
            "device_plugin_seconds": round(device_seconds, 3),
            "through_claims_seconds": round(claim_seconds, 3),
            "device_plugin_us_per_pod": round(device_seconds / count * 1e6, 1),
            "through_claims_us_per_pod": round(claim_seconds / count * 1e6, 1),
            "ratio": round(claim_seconds / device_seconds, 1),
            "failed_pods": [devices.failed_pods, claims.failed_pods],
            "same_placements": same and claims.columns == devices.columns,
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
