"""Volcano's capacity plugin with DRA queue quotas (`TestCapacityPluginDRA`, formerly
`Test_capacityPlugin_DRA`, pkg/scheduler/plugins/capacity) as rows for the end-to-end runner
(live_tables.py): queues whose capability names `deviceclass/<class>` counts, pods whose ResourceClaim
asks for devices of a class, `capacity.DynamicResourceAllocationEnable: true`, enqueue then allocate.
The claims are not allocated (no driver): only the queue's quota decides, as in Volcano's test."""

from __future__ import annotations

from typing import Any

from scheduler.live_tables import Row
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_queue
from scheduler.volcano_more_rows import only

T = "volcano/capacity"
FLAGS = {
    "capacity": ("enabledAllocatable", "enableJobEnqueued"),
    "gang": ("enableJobStarving",),
    "predicates": ("enablePredicate",),
}


def _conf() -> str:
    flags = only(FLAGS, *FLAGS)
    lines = ['actions: "enqueue, allocate"', "tiers:", "- plugins:"]
    for name in FLAGS:
        lines.append(f"  - name: {name}")
        lines += [f"    {flag}: {str(value).lower()}" for flag, value in flags[name].items()]
        if name == "capacity":
            lines += ["    arguments:", "      capacity.DynamicResourceAllocationEnable: true"]
    return "\n".join(lines) + "\n"


CONF = _conf()


def queue(name: str, **counts: int) -> dict[str, Any]:
    """Volcano's buildDRAQueue: a capability of `deviceclass/<class>` counts only (`gpu_com` -> gpu.com)."""
    return build_queue(name, capability={f"deviceclass/{c.replace('_', '.')}": str(n) for c, n in counts.items()})


def pod_and_claim(name: str, queue: str, device_class: str, count: int) -> tuple[dict[str, Any], ...]:
    """Volcano's buildDRAPodAndClaim: a pod of 1 cpu and 1Gi in its own Inqueue pod group (minTaskMember
    worker: 1), naming a ResourceClaim of one request for `count` devices of the class."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-claim", "namespace": "ns1"},
        "spec": {
            "devices": {"requests": [{"name": "req-1", "exactly": {"deviceClassName": device_class, "count": count}}]}
        },
    }
    pod = build_pod("ns1", name, "", "1", "1Gi", f"{name}-pg", annotations={"volcano.sh/task-spec": "worker"})
    pod["spec"]["resourceClaims"] = [{"name": "claim-1", "resourceClaimName": f"{name}-claim"}]
    group = build_pod_group(f"{name}-pg", "ns1", queue, 1, min_task_member={"worker": 1})
    return pod, claim, group


def case(name: str, queues: list[dict[str, Any]], *members: tuple[dict[str, Any], ...]) -> Case:
    return Case(
        name,
        CONF,
        nodes=[build_node("n1", "10", "10Gi", "10")],
        pods=[m[0] for m in members],
        groups=[m[2] for m in members],
        queues=queues,
        claims=[m[1] for m in members],
    )


def rows() -> list[Row]:
    return [
        Row(
            T,
            case(
                "DRA case 1: DRA Request within quota",
                [queue("q1", gpu_com=2)],
                pod_and_claim("p1", "q1", "gpu.com", 1),
            ),
            binds={"ns1/p1": "n1"},
            evicted=[],
        ),
        Row(
            T,
            case(
                "DRA case 2: DRA Request exceeds quota",
                [queue("q2", gpu_com=1)],
                pod_and_claim("p2", "q2", "gpu.com", 2),
            ),
            binds={},
            evicted=[],
        ),
        Row(
            T,
            case(
                "DRA case 3: Multiple Device Classes and Mixed Success/Failure",
                [queue("q3", gpu_com=1, nic_com=1)],
                pod_and_claim("p3-1", "q3", "gpu.com", 1),
                pod_and_claim("p3-2", "q3", "nic.com", 1),
                pod_and_claim("p3-3", "q3", "gpu.com", 1),
            ),
            binds={"ns1/p3-1": "n1", "ns1/p3-2": "n1"},
            evicted=[],
        ),
        Row(
            T,
            case(
                "DRA case 4: Pass-through for unconfigured DeviceClass",
                [queue("q4", gpu_com=1)],
                pod_and_claim("p4-1", "q4", "gpu.com", 1),
                pod_and_claim("p4-2", "q4", "nic.com", 100),
            ),
            binds={"ns1/p4-1": "n1", "ns1/p4-2": "n1"},
            evicted=[],
        ),
        Row(
            T,
            case(
                "DRA case 5: Job Enqueue DRA Check rejects oversize job",
                [queue("q5", gpu_com=1)],
                pod_and_claim("p5-1", "q5", "gpu.com", 2),
            ),
            binds={},
            evicted=[],
        ),
    ]
