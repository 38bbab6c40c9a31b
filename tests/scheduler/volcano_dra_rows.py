"""Volcano's DRA test cases as rows for the end-to-end runner (live_tables.py):
- the allocate action's `TestAllocateWithDRA` (pkg/scheduler/actions/allocate): a claim of one device
  of a DeviceClass whose CEL selects the driver's slice, allocated and bound with
  `predicate.DynamicResourceAllocationEnable: true`, and the same with a CEL that fails at run time,
  which leaves the pod pending and its PodGroup Inqueue;
- the capacity plugin's `TestCapacityPluginDRA` (formerly `Test_capacityPlugin_DRA`,
  pkg/scheduler/plugins/capacity): queues whose capability names `deviceclass/<class>` counts, pods
  whose ResourceClaim asks for devices of a class, `capacity.DynamicResourceAllocationEnable: true`,
  enqueue then allocate; the claims are not allocated (no driver), only the queue's quota decides, as
  in Volcano's test."""

from __future__ import annotations

from typing import Any

from scheduler.live_tables import Outcome, Row
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_queue
from scheduler.volcano_more_rows import only, tiers

T = "volcano/capacity"
FLAGS = {
    "capacity": ("enabledAllocatable", "enableJobEnqueued"),
    "gang": ("enableJobStarving",),
    "predicates": ("enablePredicate",),
}


CONF = tiers(
    *FLAGS,
    flags=only(FLAGS, *FLAGS),
    actions="enqueue, allocate",
    arguments={"capacity": {"capacity.DynamicResourceAllocationEnable": True}},
)


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


ALLOCATE_FLAGS = {
    "gang": ("enableJobReady", "enablePredicate", "enableJobPipelined", "enableTaskOrder"),
    "predicates": ("enablePredicate",),
}


def allocate_case(name: str, expression: str) -> Case:
    """TestAllocateWithDRA's objects: claim c1/claim1 for one `gpu.example.com` device, the DeviceClass
    of that name with `expression`, node n1's slice with device gpu-1 (no attributes), pod c1/p1 (1 cpu,
    1G) whose container uses the claim's request `gpu`, PodGroup pg1 of queue c1, Inqueue."""
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim1", "namespace": "c1"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": "gpu.example.com", "count": 1, "allocationMode": "ExactCount"},
                    }
                ]
            }
        },
    }
    made_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-slice1"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "n1",
            "pool": {"name": "gpu-worker", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-1"}],
        },
    }
    pod = build_pod("c1", "p1", "", "1", "1G", "pg1")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claim1"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu", "request": "gpu"}]
    return Case(
        name,
        ALLOCATE_CONF,
        nodes=[build_node("n1", "2", "4Gi", "10")],
        pods=[pod],
        groups=[build_pod_group("pg1", "c1", "c1", 1)],
        queues=[build_queue("c1")],
        claims=[claim],
        device_classes=[device_class],
        slices=[made_slice],
    )


ALLOCATE_CONF = tiers(
    *ALLOCATE_FLAGS,
    flags=only(ALLOCATE_FLAGS, *ALLOCATE_FLAGS),
    actions="allocate",
    arguments={"predicates": {"predicate.DynamicResourceAllocationEnable": True}},
)


def _still_inqueue(got: Outcome) -> str:
    phase = got.phases.get("c1/pg1", "")
    return "" if phase == "Inqueue" else f"PodGroup c1/pg1 is {phase or 'without a phase'}, expected Inqueue"


def rows() -> list[Row]:
    return [
        Row(
            "volcano/allocate",
            allocate_case("Allocate normal resourceClaim successfully", "device.driver == 'gpu.example.com'"),
            binds={"c1/p1": "n1"},
            evicted=[],
        ),
        Row(
            "volcano/allocate",
            allocate_case("claim cel runtime errors", 'device.attributes["some-driver"].healthy'),
            binds={},
            evicted=[],
            check=_still_inqueue,
        ),
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
