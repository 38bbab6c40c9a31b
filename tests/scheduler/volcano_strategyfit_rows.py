"""Volcano's `resource-strategy-fit` allocate cases (`TestAllocate`, pkg/scheduler/plugins/
resource-strategy-fit/resource_strategy_fit_test.go) as rows for the end-to-end runner
(live_tables.py): with `nvidia.com/gpu` MostAllocated (weight 2) and `cpu` LeastAllocated (1) beside
gang, drf, proportion, predicates and nodeorder, a GPU pod goes to the GPU node already holding a GPU
pod and a CPU pod to the CPU node holding none."""

from __future__ import annotations

from typing import Any

from scheduler.live_tables import Row
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_queue
from scheduler.volcano_more_rows import only, tiers

T = "volcano/resource-strategy-fit"
FLAGS = {
    "resource-strategy-fit": ("enableNodeOrder",),
    "gang": ("enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving"),
    "drf": ("enablePreemptable", "enableJobOrder"),
    "proportion": ("enableQueueOrder", "enableReclaimable", "enabledAllocatable"),
    "predicates": ("enablePredicate",),
    "nodeorder": ("enableNodeOrder",),
}
ARGUMENTS = {
    "resourceStrategyFitWeight": 10,
    "resources": {
        "nvidia.com/gpu": {"type": "MostAllocated", "weight": 2},
        "cpu": {"type": "LeastAllocated", "weight": 1},
    },
}


CONF = tiers(*FLAGS, flags=only(FLAGS, *FLAGS), actions="allocate", arguments={"resource-strategy-fit": ARGUMENTS})


def node(name: str, kind: str, gpus: str = "") -> dict[str, Any]:
    obj = build_node(name, "5", "10Gi", "10", {"nodeResourceType": kind})
    if gpus:
        obj["status"]["allocatable"]["nvidia.com/gpu"] = gpus
        obj["status"]["capacity"] = dict(obj["status"]["allocatable"])
    return obj


def pod(name: str, where: str, kind: str, gpus: str = "") -> dict[str, Any]:
    obj = build_pod(
        "c1",
        name,
        where,
        "1",
        "1G",
        "pg1",
        annotations={"volcano.sh/task-spec": "worker"},
        selector={"nodeResourceType": kind},
    )
    if gpus:
        resources = obj["spec"]["containers"][0]["resources"]
        resources["requests"]["nvidia.com/gpu"] = gpus
        resources["limits"] = {"nvidia.com/gpu": gpus}
    return obj


def case(name: str, pods: list[dict[str, Any]]) -> Case:
    nodes = [node("n1", "gpu", "10"), node("n2", "gpu", "10"), node("n3", "cpu"), node("n4", "cpu")]
    return Case(
        name, CONF, nodes=nodes, pods=pods, groups=[build_pod_group("pg1", "c1", "c1", 1)], queues=[build_queue("c1")]
    )


def rows() -> list[Row]:
    return [
        Row(
            T,
            case("GPU MostAllocated", [pod("p1", "", "gpu", "2"), pod("p2", "n2", "gpu", "2")]),
            binds={"c1/p1": "n2"},
            evicted=[],
        ),
        Row(
            T,
            case("cpu LeastAllocated", [pod("p3", "", "cpu"), pod("p4", "n3", "cpu")]),
            binds={"c1/p3": "n4"},
            evicted=[],
        ),
    ]
