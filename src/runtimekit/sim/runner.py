"""Run a simulation grid (policies x seeds) over one node list and one pod list.

Every seed's arrival sequence is built once and replayed with each policy, so policies are
compared on identical arrivals. Runs may go to worker processes (`jobs > 1`). Bad input raises
`TraceError` before anything runs. Callers: `runtimekit simulate`, benchmarks, tests.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from runtimekit import __version__
from runtimekit.model.trace import TraceError, TraceNode, TracePod, read_node_list, read_pod_list, spec_warnings
from runtimekit.scheduler.policies import POLICY_NAMES, TargetWorkload
from runtimekit.sim.arrivals import Arrivals, build_arrivals
from runtimekit.sim.bound import BoundResult, bound_columns
from runtimekit.sim.claims import DraPublication
from runtimekit.sim.replay import Cluster, ReplayResult, replay, target_workload

log = logging.getLogger(__name__)
PAPER_POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")


def bundled(name: str) -> Path:
    """A trace file shipped inside the package (the openb GPU node list and default pod list)."""
    return Path(str(files("runtimekit") / "data" / name))


DEFAULT_NODES = "openb_node_list_gpu_node.csv"
DEFAULT_PODS = "openb_pod_list_default.csv"


@dataclass(frozen=True)
class SimulationSpec:
    nodes_file: str
    pods_file: str
    policies: tuple[str, ...] = ("fgd",)
    seeds: tuple[int, ...] = tuple(range(42, 52))
    tune: float = 1.3
    bound_columns: tuple[int, ...] = ()  # columns to bound offline (sim/bound.py); none: no bound
    claims: DraPublication | None = None  # every pod asks through a ResourceClaim (sim/claims.py); None: devices

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICY_NAMES]
        if unknown:
            raise ValueError(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICY_NAMES)}")
        if not self.seeds:
            raise ValueError("give at least one seed")
        if not 0 < self.tune <= 10:
            raise ValueError(f"tune must be in (0, 10], got {self.tune}")
        bad = [c for c in self.bound_columns if not 0 <= c <= 130]
        if bad:
            raise ValueError(f"bound columns must be in 0..130, got {bad[0]}")


@dataclass
class SimulationReport:
    spec: SimulationSpec
    results: list[ReplayResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bounds: list[BoundResult] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "runtimekit_version": __version__,
            "nodes_file": self.spec.nodes_file,
            "pods_file": self.spec.pods_file,
            "tune": self.spec.tune,
            "through_claims": self.spec.claims is not None,
            "results": [r.to_json() for r in self.results],
            "bounds": [b.to_json() for b in self.bounds],
        }


def parse_seeds(text: str) -> tuple[int, ...]:
    """`42-51`, `42,45,47` or `42` (non-negative integers)."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())):
            raise ValueError(f"seeds must look like 42-51 or 42,43,44; got {text!r}")
        seeds.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    if not seeds:
        raise ValueError(f"no seeds in {text!r}")
    return tuple(seeds)


def load_inputs(spec: SimulationSpec) -> tuple[list[TraceNode], list[TracePod], list[str]]:
    nodes = read_node_list(spec.nodes_file)
    pods = read_pod_list(spec.pods_file)
    if not any(n.gpus for n in nodes):
        raise TraceError(f"{spec.nodes_file}: no node has a GPU")
    return nodes, pods, spec_warnings(pods, nodes, spec.pods_file)


@dataclass
class _Worker:
    """What one worker process replays from: the inputs, the cluster built once per node list, and
    the arrivals of the seed it replayed last (the next task is most often the same seed)."""

    nodes: list[TraceNode]
    pods: list[TracePod]
    tune: float
    workload: TargetWorkload
    cluster: Cluster
    bound_columns: tuple[int, ...] = ()
    claims: DraPublication | None = None
    arrivals: dict[int, Arrivals] = field(default_factory=dict)

    def arrivals_of(self, seed: int) -> Arrivals:
        if seed not in self.arrivals:
            self.arrivals.clear()
            self.arrivals[seed] = build_arrivals(self.pods, self.nodes, seed, self.tune)
        return self.arrivals[seed]


_worker: _Worker | None = None  # this process's inputs, set once by _init_worker


def _init_worker(
    nodes: list[TraceNode],
    pods: list[TracePod],
    tune: float,
    columns: tuple[int, ...] = (),
    claims: DraPublication | None = None,
) -> None:
    global _worker
    _worker = _Worker(nodes, pods, tune, target_workload(pods), Cluster(nodes), columns, claims)


def _inputs() -> _Worker:
    assert _worker is not None, "_init_worker runs first in every worker"
    return _worker


def _run_one(task: tuple[int, str]) -> ReplayResult:
    seed, policy = task
    worker = _inputs()
    result = replay(worker.cluster, worker.arrivals_of(seed), policy, seed, worker.workload, claims=worker.claims)
    result.arrived_milli, result.used_milli = [], []  # keep what crosses processes small
    return result


def _bound_one(seed: int) -> BoundResult:
    worker = _inputs()
    arrivals = build_arrivals(worker.pods, worker.nodes, seed, worker.tune)
    return bound_columns(worker.nodes, arrivals, seed, worker.bound_columns)


def run_simulation(
    spec: SimulationSpec,
    jobs: int = 1,
    on_result: Callable[[ReplayResult], None] | None = None,
    on_events: Callable[[int], None] | None = None,
) -> SimulationReport:
    """Run every (seed, policy) pair; results come back in (seed, policy) order."""
    started = time.perf_counter()
    nodes, pods, warnings = load_inputs(spec)
    for warning in warnings:
        log.warning("%s", warning)
    tasks = [(seed, policy) for seed in spec.seeds for policy in spec.policies]
    results: list[ReplayResult] = []
    bounds: list[BoundResult] = []
    if jobs <= 1 or len(tasks) == 1:
        _init_worker(nodes, pods, spec.tune, spec.bound_columns, spec.claims)
        worker = _inputs()
        for seed in spec.seeds:
            arrivals = build_arrivals(pods, nodes, seed, spec.tune)
            for policy in spec.policies:
                result = replay(worker.cluster, arrivals, policy, seed, worker.workload, on_events, spec.claims)
                results.append(result)
                if on_result:
                    on_result(result)
        if spec.bound_columns:
            bounds = [_bound_one(seed) for seed in spec.seeds]
    else:
        # Workers start from a fresh server process, not a fork of this one: a fork copies only the
        # calling thread, and a caller with threads of its own (gRPC, an event loop, a test run)
        # leaves the child with state those threads held half-changed (a worker crashed in GC so).
        context = multiprocessing.get_context("forkserver")
        with context.Pool(jobs, _init_worker, (nodes, pods, spec.tune, spec.bound_columns, spec.claims)) as pool:
            for result in pool.imap(_run_one, tasks):
                results.append(result)
                if on_result:
                    on_result(result)
            if spec.bound_columns:
                bounds = list(pool.imap(_bound_one, spec.seeds))
    return SimulationReport(spec, results, warnings, time.perf_counter() - started, bounds)


def expected_events(spec: SimulationSpec, pods: Sequence[TracePod], nodes: Sequence[TraceNode]) -> int:
    """How many pod events one run will have (for progress bars)."""
    return len(build_arrivals(pods, nodes, spec.seeds[0], spec.tune).pods)
