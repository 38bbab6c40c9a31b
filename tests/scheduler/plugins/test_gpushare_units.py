"""gpu-memory counted in the unit of the node a pod lands on: each node's device plugin publishes its
unit in the `labels.memoryUnit` label, and `gpu-memory: N` is N devices of that node (N x its unit,
as kubelet counts them). The fit and the assignment's MiB follow the node; nodes without the label use
the protocol's unit; a label that is not a unit refuses memory requests with a reason. Run through
the real framework on a StaticCache, with requests parsed from pod manifests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runtimekit.model import NodeCapacity, NodeInventory, NodeName, PodKey, parse_pod_request
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo

P = KitProtocol.default()
H200_MIB = NodeInventory.simulated("x", "H200", 1).gpus[0].memory_mib  # 143771: 140 GiB and a bit
CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: predicates
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""


def pod(core: int | None, units: int | None = None, gpus: int | None = None) -> dict[str, Any]:
    limits = {P.resources.core: core, P.resources.memory: units, P.resources.gpu: gpus}
    resources = {"limits": {k: str(v) for k, v in limits.items() if v is not None}}
    return {"spec": {"containers": [{"name": "main", "resources": resources}]}}


@dataclass(frozen=True)
class Case:
    nodes: dict[str, str | None]  # node -> its memory unit label (None: no label)
    pod: dict[str, Any]
    node: str | None  # where it binds (None: it stays pending)
    memory_mib: int = 0  # the assignment's MiB on that GPU
    reason: str = ""  # part of the unschedulable message


CASES = {
    "200-units-fit-only-where-a-unit-is-512Mi": Case({"n1": "1Gi", "n2": "512Mi"}, pod(10, 200), "n2", 200 * 512),
    "16-units-of-512Mi-are-8GiB": Case({"n1": "512Mi"}, pod(30, 16), "n1", 8 * 1024),
    "16-units-of-2Gi-are-32GiB": Case({"n1": "2Gi"}, pod(30, 16), "n1", 32 * 1024),
    "16-units-on-an-unlabelled-node-are-the-protocols": Case({"n1": None}, pod(30, 16), "n1", 16 * 1024),
    "the-protocols-unit-fits-as-before": Case({"n1": "1Gi"}, pod(None, 140), "n1", 140 * 1024),
    "141-units-of-1Gi-do-not-fit-an-H200": Case({"n1": "1Gi"}, pod(None, 141), None, reason="larger than the GPU"),
    "a-compute-only-share-ignores-the-unit": Case({"n1": "256Mi"}, pod(25), "n1", H200_MIB // 4),
    "a-whole-gpu-ignores-the-unit": Case({"n1": "256Mi"}, pod(None, None, 1), "n1", H200_MIB),
    "a-bad-label-refuses-memory-units": Case({"n1": "lots"}, pod(30, 16), None, reason="is not a memory unit"),
    "a-bad-label-still-takes-whole-gpus": Case({"n1": "lots"}, pod(None, None, 1), "n1", H200_MIB),
}


def run(case: Case) -> StaticCache:
    entries = []
    for name, unit in case.nodes.items():
        labels = {} if unit is None else {P.labels.memory_unit: unit}
        meta = NodeMeta(NodeName(name), labels, (), False, "H200")
        entries.append((NodeInventory.simulated(name, "H200", 1), NodeCapacity(64000, 256 << 30, 110), meta))
    cache = StaticCache(entries)
    job = JobInfo(JobKey("job"), "default", "job")
    job.add(TaskInfo(PodKey("job-0"), "default", "job-0", job.key, parse_pod_request(case.pod, P)))
    cache.add_job(job)
    Framework(parse_conf(CONF), builtin_registry(), BuildContext(protocol=P)).run_once(cache)
    return cache


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_gpu_memory_counts_in_the_unit_of_the_node(case: Case) -> None:
    cache = run(case)
    key = PodKey("job-0")
    if case.node is None:
        assert key not in cache.bound
        assert case.reason in cache.unschedulable[key].message
        return
    assert str(cache.bound[key].node) == case.node
    (slot,) = cache.ledger.bookings()[key].slots
    assert slot.memory_mib == case.memory_mib
