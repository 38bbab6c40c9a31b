"""What a pod's GPU constraints (HAMi's `nvidia.com/use-gputype`, `use-gpuuuid`, ... read by the `hami`
preset) cost the gpushare predicate: the same share request over every node of the openb GPU node
list (1213 nodes, 6212 GPUs, mixed models), without a constraint, with a card type to use, and with a
UUID to avoid. With a constraint the predicate runs on a copy of the table in which the GPUs the pod
may not use are unusable (scheduler/plugins/gpushare/selection.py). Prints JSON: milliseconds per
predicate call (median and 90th percentile of --repeat calls) and how many nodes pass.
Usage: .venv/bin/python benchmarks/bench_gpu_selector.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    GpuSelector,
    NodeCapacity,
    NodeInventory,
    NodeTable,
    PodKey,
    PodRequest,
)
from runtimekit.model.trace import read_node_list
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.framework.info import JobKey, TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.plugins.gpushare.plugin import GpuShareArgs, GpuSharePlugin
from runtimekit.sim.runner import DEFAULT_NODES, bundled


@dataclass
class View:
    """The part of a session the predicate reads."""

    table: NodeTable
    uid: int = 0
    snapshot: Any = None
    jobs: dict[Any, Any] = field(default_factory=dict)
    queues: dict[Any, Any] = field(default_factory=dict)
    now: float = 0.0


def build_table() -> NodeTable:
    table = NodeTable()
    for node in read_node_list(bundled(DEFAULT_NODES)):
        if node.gpus:
            inventory = NodeInventory.simulated(node.name, node.model, node.gpus, 16384)
            table.add_node(inventory, NodeCapacity(node.cpu_milli, node.memory_mib << 20, 110))
    return table


def timed(plugin: GpuSharePlugin, task: TaskInfo, view: View, repeat: int) -> dict[str, float]:
    rows = view.table.active_rows()
    times = []
    passed = 0
    for _ in range(repeat):
        start = time.perf_counter()
        verdict = plugin.predicate(task, rows, view)  # type: ignore[arg-type]
        times.append((time.perf_counter() - start) * 1000)
        passed = int(verdict.passed.sum())
    times.sort()
    return {
        "ms_median": round(statistics.median(times), 3),
        "ms_p90": round(times[int(0.9 * (len(times) - 1))], 3),
        "nodes_passing": passed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    table = build_table()
    protocol = preset_protocol("hami")
    plugin = GpuSharePlugin(GpuShareArgs(), BuildContext(protocol=protocol, rng=random.Random(0)))
    request = PodRequest(1000, 0, (ContainerGpuRequest("main", GpuRequest(GpuKind.SHARE, 1, 300, 3000)),))
    some_node = table.node_names()[0]
    avoided = table.inventory(some_node).gpus[0].uuid
    model = table.inventory(some_node).model
    cases = {
        "no-constraint": None,
        f"use-gputype-{model}": GpuSelector(models=(model,), contains=True, model_keys=("nvidia.com/use-gputype",)),
        "nouse-gpuuuid-one-gpu": GpuSelector(uuids_avoided=(avoided,), uuid_keys=("nvidia.com/nouse-gpuuuid",)),
    }
    results = {}
    for name, selector in cases.items():
        task = TaskInfo(PodKey(name), "default", name, JobKey(name), request, gpu_select=selector)
        results[name] = timed(plugin, task, View(table), args.repeat)
    print(
        json.dumps(
            {"nodes": len(table.node_names()), "gpus": int(table.gpu_count.sum()), "predicate": results}, indent=2
        )
    )


if __name__ == "__main__":
    main()
