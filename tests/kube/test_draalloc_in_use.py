"""What allocated claims hold, read once for many nodes (`InUse`, `InUseByPool`): the allocator gives
the same answers from them as from the claims themselves, reads only the node's pools, and changes
neither (the scheduler hands one to every node it tries)."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import cast

import pytest

from kube.test_draalloc import (
    CLASSES,
    DRIVER_A,
    LABELS,
    NODE1,
    NODE2,
    allocated,
    claim,
    devices_of,
    gpu_with_counters,
    req,
    shared_gpu,
    slice_,
)
from runtimekit.kube.objects import AllocationResult, ResourceClaim
from runtimekit.kube.semantics.draalloc import DevicePools, InUse, InUseByPool, allocate

FORMS = {"claims": lambda c: c, "InUse": InUse.of, "InUseByPool": InUseByPool.of}


def held_as(allocation: AllocationResult, name: str) -> ResourceClaim:
    return cast(ResourceClaim, {"metadata": {"name": name}, "status": {"allocation": allocation}})


@pytest.mark.parametrize("form", FORMS)
def test_shares_of_a_device_add_up_in_every_form(form: str) -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, shared_gpu("gpu-0"))]
    share = req(capacity={"requests": {"memory": "30Gi", "cores": "50"}})
    made = allocate([claim("c0", share)], NODE1, LABELS, CLASSES, slices)
    assert made is not None
    [first] = made
    one, two = [held_as(first, "c0")], [held_as(first, "c0"), held_as(first, "c1")]
    assert allocate([claim("c1", share)], NODE1, LABELS, CLASSES, slices, FORMS[form](one)) is not None
    assert allocate([claim("c2", share)], NODE1, LABELS, CLASSES, slices, FORMS[form](two)) is None  # 90Gi > 80Gi


@pytest.mark.parametrize("form", FORMS)
def test_counters_in_use_count_in_every_form(form: str) -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    devices = (gpu_with_counters("whole", "80Gi"), gpu_with_counters("half-0", "40Gi"))
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, *devices, sharedCounters=counters)]
    taken = FORMS[form](allocated((DRIVER_A, "pool-1", "half-0")))
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, taken) is None  # whole overlaps half-0


@pytest.mark.parametrize("form", FORMS)
def test_devices_of_other_pools_do_not_count(form: str) -> None:
    slices = [
        slice_("n1", NODE1, "pool-1", DRIVER_A, {"name": "gpu-0"}),
        slice_("n2", NODE2, "pool-2", DRIVER_A, {"name": "gpu-0"}),
    ]
    elsewhere = FORMS[form](allocated((DRIVER_A, "pool-2", "gpu-0")))
    assert devices_of(allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, elsewhere)) == [
        [("req-0", "gpu-0")]
    ]
    assert allocate([claim("c0", req())], NODE2, {}, CLASSES, slices, elsewhere) is None


def test_in_pools_reads_only_those_pools() -> None:
    claims = allocated((DRIVER_A, "pool-1", "a"), (DRIVER_A, "pool-2", "b"), ("driver-b", "pool-1", "c"))
    for held in (InUse.of(claims), InUseByPool.of(claims)):
        assert held.in_pools([(DRIVER_A, "pool-1")]).exclusive == {(DRIVER_A, "pool-1", "a")}
        assert held.in_pools([(DRIVER_A, "pool-1"), ("driver-b", "pool-1")]).exclusive == {
            (DRIVER_A, "pool-1", "a"),
            ("driver-b", "pool-1", "c"),
        }
        assert held.in_pools([("driver-b", "pool-2")]) == InUse()


def test_allocation_changes_nothing_it_is_handed() -> None:
    """The ledger's capacity (`held`) and the shares chosen are the node's own copy: what the caller
    hands in for all nodes is the same afterwards."""
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, shared_gpu("gpu-0"))]
    share = req(capacity={"requests": {"memory": "30Gi", "cores": "50"}})
    made = allocate([claim("c0", share)], NODE1, LABELS, CLASSES, slices)
    assert made is not None
    [first] = made
    key = (DRIVER_A, "pool-1", "gpu-0")
    ledger = {key: {f"{DRIVER_A}/memory": Fraction(1 << 30)}}
    for held in (InUse.of([held_as(first, "c0")]), InUseByPool.of([held_as(first, "c0")])):
        before = copy.deepcopy(held)
        assert allocate([claim("c1", share)], NODE1, LABELS, CLASSES, DevicePools(slices), held, held=ledger)
        assert held == before


def test_with_allocations_is_a_new_version() -> None:
    base = InUseByPool.of(allocated((DRIVER_A, "pool-1", "a")))
    extra: AllocationResult = {
        "devices": {"results": [{"request": "r", "driver": DRIVER_A, "pool": "pool-1", "device": "b"}]}
    }
    more = base.with_allocations([extra])
    assert more.in_pools([(DRIVER_A, "pool-1")]).exclusive == {(DRIVER_A, "pool-1", "a"), (DRIVER_A, "pool-1", "b")}
    assert base.in_pools([(DRIVER_A, "pool-1")]).exclusive == {(DRIVER_A, "pool-1", "a")}


def test_a_filter_asks_only_whether_claims_fit() -> None:
    slices = [slice_("s1", NODE1, "pool-1", DRIVER_A, {"name": "gpu-0"})]
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, results=False) == []
    taken = allocated((DRIVER_A, "pool-1", "gpu-0"))
    assert allocate([claim("c0", req())], NODE1, LABELS, CLASSES, slices, taken, results=False) is None


def test_what_a_node_reaches_and_selects_is_remembered_not_shared() -> None:
    """The pools remember each node's devices and which of them a class selects; every caller gets
    its own list (the allocator sorts it by preference), and a node's labels are part of the key."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}]}
    pools = DevicePools(
        [
            slice_("n1", NODE1, "pool-1", DRIVER_A, {"name": "a"}, {"name": "b"}),
            slice_("shared", "", "pool-2", DRIVER_A, {"name": "remote"}, nodeSelector=selector),
        ]
    )
    first, _ = pools.reach(NODE1, {"region": "r1"})
    first.reverse()
    again, _ = pools.reach(NODE1, {"region": "r1"})
    assert [c.key[2] for c in again] == ["a", "b", "remote"]
    assert [c.key[2] for c in pools.reach(NODE1, {"region": "r2"})[0]] == ["a", "b"]
    two = req(count=2)
    assert devices_of(allocate([claim("c0", two)], NODE1, {"region": "r1"}, CLASSES, pools)) == [
        [("req-0", "a"), ("req-0", "b")]
    ]
    held = allocated((DRIVER_A, "pool-1", "a"))
    assert devices_of(allocate([claim("c0", two)], NODE1, {"region": "r1"}, CLASSES, pools, held)) == [
        [("req-0", "b"), ("req-0", "remote")]
    ]
    assert allocate([claim("c0", two)], NODE1, {"region": "r2"}, CLASSES, pools, held) is None
