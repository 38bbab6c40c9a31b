"""kube-scheduler's own performance workloads (test/integration/scheduler_perf), end to end against the kit's scheduler.

The workload files and templates are kube's, copied under `benchmarks/scheduler_perf/` (misc, affinity,
topology_spreading; each file names its commit). Each selected workload runs on a fresh embedded API
server with `runtimekit scheduler` (its default conf, taking `default-scheduler`'s pods) as a process of
its own (`e2e_harness.py`, shared with `bench_scheduler_e2e.py`); the opcodes are played by
`scheduler_perf_ops.py`. Measured as scheduler_perf measures:

- `SchedulingThroughput`: pods/s of the measured pods (the op with `collectMetrics: true`), sampled
  once a second (throughputCollector: Average, Perc50/90/95/99); `threshold` is compared with Average
  (with the whole-run rate when a run is too short for a sample).
- latency: bind time − creation time per measured pod, from this client: creation is when the API
  server acknowledged the pod, binding when the watch first shows `spec.nodeName` (what
  `scheduler_pod_scheduling_sli_duration_seconds` measures inside kube-scheduler, seen from outside).
- the scheduler's RSS at the end and its peak (VmHWM), its CPU per measured pod (and the rate that
  gives with a whole core), the load average.

Selection: `--label` (default `performance`, kube's CI benchmark; `integration-test` picks the smallest
ones) and `--workload REGEX` over `TestCase/workload`. featureGates name kube-scheduler internals the kit
has not got: a workload whose params and template equal an earlier one's of the same test case (the
`_QueueingHintsEnabled`, `_AsyncAPICallsEnabled` variants) is listed as the same and not run again.
`--nodes N` scales every param of a workload by N / its node count, for quick runs (threshold kept,
marked `scaled`). `--gpu [SHARE]` is the GPU variant: nodes carry 8 simulated H200s and each pod of a
createPods op asks for SHARE % of one GPU (default 25).

Usage: .venv/bin/python benchmarks/scheduler_perf.py [--workload 'SchedulingBasic/5000Nodes_10000Pods']
       [--label performance] [--nodes 500] [--gpu [25]] [--timeout 600] [--conf FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from e2e_harness import apiserver, cpu_seconds, rss_bytes, scheduler
from scheduler_perf_ops import SUPPORTED, Measured, Runner, percentile, substitute

from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.cluster.controllers.resourceclaims import ResourceClaimController
from runtimekit.kube.http import KubeHttp

DATA = Path(__file__).resolve().parent / "scheduler_perf"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Workload:
    case: str
    name: str
    ops: list[dict[str, Any]]
    params: dict[str, int]
    labels: tuple[str, ...]
    threshold: float | None
    base: Path  # the folder its template paths are relative to
    default_pod_template: str | None
    scaled: bool = False

    @property
    def full_name(self) -> str:
        return f"{self.case}/{self.name}"

    def nodes(self) -> int:
        return sum(int(op.get("count", 0)) for op in self.resolved() if op["opcode"] == "createNodes")

    def resolved(self) -> list[dict[str, Any]]:
        return [substitute(op, self.params) for op in self.ops]


def load(files: list[Path] | None = None) -> list[Workload]:
    out = []
    for path in files or sorted(DATA.glob("*/performance-config.yaml")):
        for case in yaml.load(path.read_text(), Loader=yaml.CSafeLoader):
            for w in case["workloads"]:
                out.append(
                    Workload(
                        case=case["name"],
                        name=w["name"],
                        ops=case["workloadTemplate"],
                        params=dict(w.get("params") or {}),
                        labels=tuple(w.get("labels") or ()),
                        threshold=w.get("threshold"),
                        base=path.parent,
                        default_pod_template=case.get("defaultPodTemplatePath"),
                    )
                )
    return out


def select(workloads: list[Workload], pattern: str, label: str) -> tuple[list[Workload], list[dict[str, str]]]:
    chosen: list[Workload] = []
    skipped: list[dict[str, str]] = []
    for w in workloads:
        if label not in w.labels or not re.search(pattern, w.full_name):
            continue
        unknown = sorted({op["opcode"] for op in w.ops} - set(SUPPORTED))
        twin = next((c for c in chosen if c.case == w.case and c.params == w.params), None)
        if unknown:
            skipped.append({"workload": w.full_name, "why": f"opcodes not played: {', '.join(unknown)}"})
        elif twin is not None:
            skipped.append({"workload": w.full_name, "why": f"featureGates only: the same as {twin.full_name}"})
        else:
            chosen.append(w)
    return chosen, skipped


def scale(w: Workload, nodes: int) -> Workload:
    """Every count param times nodes / the workload's node count (at least 1); per-node counts
    (`maxClaimsPerNode`) and durations are kept."""
    factor = nodes / max(1, w.nodes())
    if factor >= 1:
        return w
    params = {
        k: v if not isinstance(v, int) or "PerNode" in k else max(1, round(v * factor)) for k, v in w.params.items()
    }
    return replace(w, params=params, scaled=True)


def uses_claims(w: Workload) -> bool:
    """A DRA workload: its pods' claims are made from templates by the claim controller."""
    return any(op["opcode"] in ("createResourceDriver", "allocResourceClaims") for op in w.ops)


@contextmanager
def claim_controller(url: str, wanted: bool) -> Iterator[None]:
    """kube-controller-manager's ResourceClaim controller (scheduler_perf starts it for DRA workloads),
    in this process, while `wanted`."""
    if not wanted:
        yield
        return
    manager = ControllerManager(KubeHttp.connect(server=url), [ResourceClaimController]).start()
    try:
        if not manager.synced(30):
            raise SystemExit("the claim controller did not sync")
        yield
    finally:
        manager.stop()


def figures(w: Workload, measured: Measured | None, bound: dict[str, float]) -> dict[str, Any]:
    if measured is None:
        return {"workload": w.full_name, "error": "no op with collectMetrics: true"}
    keys = list(measured.arrived)
    done = [k for k in keys if k in bound]
    latencies = [bound[k] - measured.arrived[k] for k in done]
    overall = len(done) / (measured.finished - measured.started) if done else 0.0
    samples = measured.samples
    average = sum(samples) / len(samples) if samples else None
    judged = average if average is not None else overall
    return {
        "workload": w.full_name,
        "params": w.params,
        "scaled": w.scaled,
        "measured_pods": len(keys),
        "bound": len(done),
        "SchedulingThroughput": {
            "Average": round(average, 1) if average is not None else None,
            **{f"Perc{q}": round(percentile(samples, q), 1) for q in (50, 90, 95, 99) if samples},
            "samples": len(samples),
        },
        "pods_per_second_overall": round(overall, 1),
        "threshold": w.threshold,
        "meets_threshold": None if w.threshold is None else judged >= w.threshold,
        "latency_seconds": {f"p{q}": round(percentile(latencies, q), 3) for q in (50, 90, 99)} if latencies else {},
        "latency_is": "binding seen by watch minus creation acknowledged, per measured pod",
        "scheduler_cpu_ms_per_pod": round(measured.scheduler_cpu * 1000 / max(1, len(keys)), 2),
        # the rate one whole core would give the scheduler: on a shared host, steadier than the wall-time rate
        "pods_per_scheduler_cpu_second": round(len(keys) / measured.scheduler_cpu) if measured.scheduler_cpu else None,
        # where the machine's cores went per measured pod: all three processes share them
        "cpu_ms_per_pod": {
            "scheduler": round(measured.scheduler_cpu * 1000 / max(1, len(keys)), 2),
            "apiserver": round(measured.apiserver_cpu * 1000 / max(1, len(keys)), 2),
            "client": round(measured.client_cpu * 1000 / max(1, len(keys)), 2),
        },
    }


def run(w: Workload, gpu_share: int, timeout: float, conf: str | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    with (
        apiserver() as (url, server_pid),
        scheduler(url, conf, ["--scheduler-name", "default-scheduler"]) as process,
        claim_controller(url, uses_claims(w)),
    ):
        runner = Runner(
            url,
            w.base,
            gpu_share,
            scheduler_cpu=lambda: cpu_seconds(process.pid),
            apiserver_cpu=lambda: cpu_seconds(server_pid),
        )
        runner.timeout = timeout
        runner.wait_for_scheduler()
        measured = runner.run(w.ops, w.params, w.default_pod_template)
        if process.poll() is not None:
            raise SystemExit(f"{w.full_name}: the scheduler exited with status {process.returncode}; no figure")
        result = figures(w, measured, runner.bound)
        status = Path(f"/proc/{process.pid}/status").read_text()
        peak = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0)
        result |= {
            "gpu_share_percent": gpu_share or None,
            "scheduler_rss_mib": round(rss_bytes(process.pid) / MIB),
            "scheduler_peak_rss_mib": round(peak / MIB),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "wall_seconds": round(time.perf_counter() - started, 1),
        }
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="", help="regex over TestCase/workload")
    parser.add_argument("--label", default="performance", help="performance, integration-test or short")
    parser.add_argument("--nodes", type=int, default=0, help="scale each workload down to about this many nodes")
    parser.add_argument("--gpu", type=int, nargs="?", const=25, default=0, help="GPU variant: pods ask for SHARE %%")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for an op's pods")
    parser.add_argument("--conf", type=Path, help="the scheduler's conf (Volcano's format; default: its built-in one)")
    parser.add_argument("--list", action="store_true", help="print the selection and exit")
    args = parser.parse_args(argv)
    chosen, skipped = select(load(), args.workload, args.label)
    if args.nodes:
        chosen = [scale(w, args.nodes) for w in chosen]
    if args.list:
        print(json.dumps({"run": [w.full_name for w in chosen], "skipped": skipped}, indent=2))
        return 0
    results = []
    for w in chosen:
        print(f"== {w.full_name} {w.params}", file=sys.stderr, flush=True)
        results.append(run(w, args.gpu, args.timeout, args.conf.read_text() if args.conf else None))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"workloads": results, "skipped": skipped}, indent=2))
    return 0 if all(r.get("bound") == r.get("measured_pods") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
