"""The structured allocator (`runtimekit.kube.semantics.draalloc`) on the cases of kube's allocator
tests (staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting, case names
kept): one node, classes selecting a driver by CEL, slices of named devices, claims with requests,
devices already allocated; each case's expected allocation or "does not fit" or error is kube's."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.kube.objects import DeviceClass, ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.draalloc import AllocationError, DevicePools, allocate

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
NODE1, NODE2 = "node-1", "node-2"
LABELS = {"region": "region-1"}


def device_class(name: str, driver: str, *selectors: str, config: Any = None) -> DeviceClass:
    exprs = [f'device.driver == "{driver}"', *selectors]
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = config
    return cast(DeviceClass, {"metadata": {"name": name}, "spec": spec})


CLASSES = {"class-a": device_class("class-a", DRIVER_A), "class-b": device_class("class-b", DRIVER_B)}


def dev(name: str, **attributes: Any) -> dict[str, Any]:
    attrs = {k: ({"int": v} if isinstance(v, int) else {"string": v}) for k, v in attributes.items()}
    return {"name": name, "attributes": attrs}


def slice_(name: str, node: str, pool: str, driver: str, *devices: dict[str, Any], **spec: Any) -> ResourceSlice:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": spec.pop("generation", 1), "resourceSliceCount": spec.pop("count", 1)},
        "devices": list(devices),
        **spec,
    }
    if node:
        body["nodeName"] = node
    return cast(ResourceSlice, {"metadata": {"name": name}, "spec": body})


def claim(name: str, *requests: dict[str, Any], constraints: Any = None, config: Any = None) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return cast(
        ResourceClaim,
        {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}},
    )


def req(name: str = "req-0", cls: str = "class-a", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, **exactly}}


def allocated(*devices: tuple[str, str, str]) -> list[ResourceClaim]:
    results = [{"request": "r", "driver": d, "pool": p, "device": n} for d, p, n in devices]
    return [
        cast(
            ResourceClaim, {"metadata": {"name": "other"}, "status": {"allocation": {"devices": {"results": results}}}}
        )
    ]


def devices_of(results: list[Any] | None) -> list[list[tuple[str, str]]] | None:
    if results is None:
        return None
    return [[(r["request"], r["device"]) for r in a["devices"]["results"]] for a in results]


ON_NODE = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE1]}]}]}


def test_simple() -> None:
    [result] = allocate(
        [claim("c0", req())], NODE1, LABELS, CLASSES, [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    ) or [None]
    assert result == {
        "devices": {"results": [{"request": "req-0", "driver": DRIVER_A, "pool": "pool-1", "device": "device-1"}]},
        "nodeSelector": ON_NODE,
    }


def test_other_node() -> None:
    slices = [slice_("s1", NODE2, "pool-1", DRIVER_A, dev("device-1"))]
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices) is None


def test_small_and_large_with_selectors_on_attributes() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("small", memory=1), dev("large", memory=2))]
    small = req("small", selectors=[{"cel": {"expression": f'device.attributes["{DRIVER_A}"].memory == 1'}}])
    large = req("large", selectors=[{"cel": {"expression": f'device.attributes["{DRIVER_A}"].memory >= 2'}}])
    assert devices_of(allocate([claim("c0", large, small)], NODE1, LABELS, CLASSES, slices)) == [
        [("large", "large"), ("small", "small")]
    ]


def test_count_and_too_many_devices() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    assert devices_of(allocate([claim("c0", req(count=2))], NODE1, LABELS, CLASSES, slices)) == [
        [("req-0", "device-1"), ("req-0", "device-2")]
    ]
    assert allocate([claim("c0", req(count=3))], NODE1, LABELS, CLASSES, slices) is None


def test_already_allocated_devices_are_skipped() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    taken = allocated((DRIVER_A, "pool-1", "device-1"))
    assert devices_of(allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, taken)) == [
        [("req-0", "device-2")]
    ]


def test_all_devices_some_allocated_does_not_fit_unless_admin_access() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"), dev("device-2"))]
    taken = allocated((DRIVER_A, "pool-1", "device-1"))
    assert allocate([claim("c0", req(allocationMode="All"))], NODE1, LABELS, CLASSES, slices, taken) is None
    admin = allocate([claim("c0", req(allocationMode="All", adminAccess=True))], NODE1, LABELS, CLASSES, slices, taken)
    assert admin is not None
    assert [(r["device"], r.get("adminAccess")) for r in admin[0]["devices"]["results"]] == [
        ("device-1", True),
        ("device-2", True),
    ]


def test_all_devices_slice_without_devices_and_no_slices() -> None:
    assert (
        allocate([claim("c0", req(allocationMode="All"))], NODE1, LABELS, CLASSES, [slice_("s1", NODE1, "p", DRIVER_A)])
        is None
    )
    assert allocate([claim("c0", req(allocationMode="All"))], NODE1, LABELS, CLASSES, []) is None


def test_all_devices_of_an_incomplete_pool_is_an_error() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2)]
    with pytest.raises(AllocationError, match="incomplete"):
        allocate([claim("c0", req(allocationMode="All"))], NODE1, LABELS, CLASSES, slices)
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices) is None  # ExactCount skips the pool


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    slices = [
        slice_("old", NODE1, "pool-1", DRIVER_A, dev("device-old"), generation=1),
        slice_("new", NODE1, "pool-1", DRIVER_A, dev("device-new"), generation=2),
    ]
    assert devices_of(allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices)) == [[("req-0", "device-new")]]


@pytest.mark.parametrize(
    ("values", "fits"),
    [(("a", "a"), [("req-0", "device-1"), ("req-1", "device-2")]), (("a", "b"), None)],
    ids=["with-constraint", "with-constraint-not-matching"],
)
def test_match_attribute_constraint(values: tuple[str, str], fits: Any) -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1", numa=values[0]), dev("device-2", numa=values[1]))]
    constraint = [{"requests": ["req-0", "req-1"], "matchAttribute": f"{DRIVER_A}/numa"}]
    claims = [claim("c0", req("req-0"), req("req-1"), constraints=constraint)]
    assert devices_of(allocate(claims, NODE1, LABELS, CLASSES, slices)) == ([fits] if fits else None)


def test_match_attribute_backtracks_to_a_matching_pair() -> None:
    devices = (dev("device-1", numa="a"), dev("device-2", numa="b"), dev("device-3", numa="b"))
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, *devices)]
    constraint = [{"matchAttribute": f"{DRIVER_A}/numa"}]
    assert devices_of(
        allocate([claim("c0", req(count=2), constraints=constraint)], NODE1, LABELS, CLASSES, slices)
    ) == [[("req-0", "device-2"), ("req-0", "device-3")]]


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    request = {
        "name": "req-0",
        "firstAvailable": [
            {"name": "sub-0", "deviceClassName": "class-a", "count": 2},
            {"name": "sub-1", "deviceClassName": "class-a"},
        ],
    }
    assert devices_of(allocate([claim("c0", request)], NODE1, LABELS, CLASSES, slices)) == [
        [("req-0/sub-1", "device-1")]
    ]


def test_unknown_class_and_bad_cel_are_errors() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    with pytest.raises(AllocationError, match="device class no-such-class does not exist"):
        allocate([claim("c0", req(cls="no-such-class"))], NODE1, LABELS, CLASSES, slices)
    bad = req(selectors=[{"cel": {"expression": "device.driver == "}}])
    with pytest.raises(AllocationError, match="compilation failed"):
        allocate([claim("c0", bad)], NODE1, LABELS, CLASSES, slices)
    runtime = req(selectors=[{"cel": {"expression": f'device.attributes["{DRIVER_A}"].missing == 1'}}])
    with pytest.raises(AllocationError, match="runtime error"):
        allocate([claim("c0", runtime)], NODE1, LABELS, CLASSES, slices)


def test_network_attached_and_all_nodes_devices() -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]
    }
    attached = slice_("s1", "", "pool-1", DRIVER_A, dev("device-1"), nodeSelector=selector)
    [result] = allocate([claim("c0", req())], NODE1, LABELS, CLASSES, [attached]) or [None]
    assert result is not None
    assert result["nodeSelector"] == selector
    assert allocate([claim("c0", req())], NODE1, {"region": "region-2"}, CLASSES, [attached]) is None
    everywhere = slice_("s1", "", "pool-1", DRIVER_A, dev("device-1"), allNodes=True)
    [result] = allocate([claim("c0", req())], NODE1, LABELS, CLASSES, [everywhere]) or [None]
    assert result is not None
    assert "nodeSelector" not in result


def test_class_and_claim_config_are_copied() -> None:
    opaque = {"opaque": {"driver": DRIVER_A, "parameters": {"sharing": "timeSlicing"}}}
    classes = {"class-a": device_class("class-a", DRIVER_A, config=[opaque])}
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, dev("device-1"))]
    [result] = allocate(
        [claim("c0", req(), config=[{"requests": ["req-0"], **opaque}])], NODE1, LABELS, classes, slices
    ) or [None]
    assert result is not None
    assert result["devices"]["config"] == [
        {"source": "FromClass", "requests": ["req-0"], **opaque},
        {"source": "FromClaim", "requests": ["req-0"], **opaque},
    ]


def gpu_with_counters(name: str, memory: str) -> dict[str, Any]:
    return {"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]}


def test_partitionable_devices_share_counters() -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    devices = (
        gpu_with_counters("whole", "80Gi"),
        gpu_with_counters("half-0", "40Gi"),
        gpu_with_counters("half-1", "40Gi"),
    )
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, *devices, sharedCounters=counters)]
    two = allocate([claim("c0", req(count=2))], NODE1, LABELS, CLASSES, slices)
    assert devices_of(two) == [[("req-0", "half-0"), ("req-0", "half-1")]]  # the whole GPU and a half overlap
    taken = allocated((DRIVER_A, "pool-1", "half-0"))
    assert devices_of(allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, taken)) == [[("req-0", "half-1")]]
    both = allocated((DRIVER_A, "pool-1", "half-0"), (DRIVER_A, "pool-1", "half-1"))
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, both) is None


def shared_gpu(name: str, **policy: Any) -> dict[str, Any]:
    memory: dict[str, Any] = {"value": "80Gi"}
    if policy:
        memory["requestPolicy"] = policy
    return {"name": name, "allowMultipleAllocations": True, "capacity": {"memory": memory, "cores": {"value": "100"}}}


def test_consumable_capacity_shares_a_device_between_claims() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, shared_gpu("gpu-0"))]
    share = req(capacity={"requests": {"memory": "30Gi", "cores": "50"}})
    first = allocate([claim("c0", share)], NODE1, LABELS, CLASSES, slices)
    assert first is not None
    [result] = first[0]["devices"]["results"]
    assert result["device"] == "gpu-0"
    assert result["consumedCapacity"] == {"cores": "50", "memory": "30Gi"}
    assert result["shareID"]
    held: list[ResourceClaim] = [{"metadata": {"name": "c0"}, "status": {"allocation": first[0]}}]
    assert allocate([claim("c1", share)], NODE1, LABELS, CLASSES, slices, held) is not None  # 60Gi, 100 cores
    both = [*held, {"metadata": {"name": "c1"}, "status": {"allocation": first[0]}}]
    assert allocate([claim("c2", share)], NODE1, LABELS, CLASSES, slices, both) is None  # 90Gi > 80Gi
    # a request naming no amount of a capacity consumes all of it (no policy default)
    assert allocate([claim("c3", req())], NODE1, LABELS, CLASSES, slices, held) is None


def test_capacity_request_policy_rounds_up() -> None:
    ranged = shared_gpu("gpu-0", default="10Gi", validRange={"min": "10Gi", "step": "10Gi", "max": "40Gi"})
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, ranged)]
    asked = allocate(
        [claim("c0", req(capacity={"requests": {"memory": "15Gi", "cores": "10"}}))], NODE1, LABELS, CLASSES, slices
    )
    assert asked is not None
    assert asked[0]["devices"]["results"][0]["consumedCapacity"]["memory"] == "20Gi"
    too_big = req(capacity={"requests": {"memory": "50Gi", "cores": "10"}})
    assert allocate([claim("c0", too_big)], NODE1, LABELS, CLASSES, slices) is None
    valued = [slice_("s1", NODE1, "pool-1", DRIVER_A, shared_gpu("gpu-0", validValues=["20Gi", "40Gi"]))]
    got = allocate(
        [claim("c0", req(capacity={"requests": {"memory": "21Gi", "cores": "1"}}))], NODE1, LABELS, CLASSES, valued
    )
    assert got is not None
    assert got[0]["devices"]["results"][0]["consumedCapacity"]["memory"] == "40Gi"


def test_quantity_compare_in_a_selector() -> None:
    big = {"name": "big", "capacity": {"memory": {"value": "141Gi"}}}
    small = {"name": "small", "capacity": {"memory": {"value": "24Gi"}}}
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, small, big)]
    expr = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("80Gi")) >= 0'
    assert devices_of(
        allocate([claim("c0", req(selectors=[{"cel": {"expression": expr}}]))], NODE1, LABELS, CLASSES, slices)
    ) == [[("req-0", "big")]]


def test_same_input_same_allocation() -> None:
    slices = [slice_(f"s{i}", NODE1, f"pool-{i}", DRIVER_A, dev("device-1"), dev("device-2")) for i in (2, 1)]
    runs = [devices_of(allocate([claim("c0", req(count=3))], NODE1, LABELS, CLASSES, slices)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2] == [[("req-0", "device-1"), ("req-0", "device-2"), ("req-0", "device-1")]]


def test_counters_may_sit_in_a_slice_of_their_own() -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    devices = (gpu_with_counters("whole", "80Gi"), gpu_with_counters("half-0", "40Gi"))
    slices = [
        slice_("devices", NODE1, "pool-1", DRIVER_A, *devices, count=2),
        slice_("counters", NODE1, "pool-1", DRIVER_A, sharedCounters=counters, count=2),
    ]
    taken = allocated((DRIVER_A, "pool-1", "half-0"))
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, taken) is None  # whole overlaps half-0
    assert devices_of(allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices)) == [[("req-0", "whole")]]


def test_device_pools_built_once_answer_every_node() -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]
    }
    slices = [
        slice_("n1", NODE1, "pool-1", DRIVER_A, dev("gpu-0", memory=1)),
        slice_("n2", NODE2, "pool-2", DRIVER_A, dev("gpu-0", memory=2)),
        slice_("shared", "", "pool-3", DRIVER_A, dev("remote", memory=3), nodeSelector=selector),
    ]
    pools = DevicePools(slices)
    expr = f'device.attributes["{DRIVER_A}"].memory >= 2'
    wanted = [claim("c0", req(selectors=[{"cel": {"expression": expr}}]))]
    for node, labels in ((NODE1, LABELS), (NODE2, {"region": "region-2"}), (NODE2, LABELS), ("node-3", {})):
        assert allocate(wanted, node, labels, CLASSES, pools) == allocate(wanted, node, labels, CLASSES, slices)
    got = allocate(wanted, NODE2, LABELS, CLASSES, pools)
    assert got is not None
    assert [(r["pool"], r["device"]) for r in got[0]["devices"]["results"]] == [("pool-2", "gpu-0")]
    assert allocate(wanted, "node-3", {}, CLASSES, pools) is None
