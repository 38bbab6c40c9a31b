"""The shared GPU ledger, the other direction: an allocated ResourceClaim whose device is a GPU of the
ledger (its `uuid`) is booked in the scheduler cache's node table, so gpushare's fit (and every policy
reading free core and memory) sees it; deallocated or deleted, it gives the GPU back, and a restarted
cache rebuilds it from the claims whatever order it hears of claims, slices and nodes
(docs/user-guide/dra.md)."""

from __future__ import annotations

import threading
from typing import Any

from runtimekit.model import GpuKind, GpuRequest, NodeName
from runtimekit.model.gpu import NodeInventory
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.dra import CLAIMS, SLICES
from runtimekit.scheduler.plugins.gpushare.fit import fitting_gpus
from runtimekit.scheduler.scheduling_queue import SchedulingQueue
from scheduler.fake_api import P, node_object

DRIVER = "gpu.runtimekit.aliyun.com"
UUIDS = [gpu.uuid for gpu in NodeInventory.simulated("n1", "T4", 2, 16384).gpus]  # node_object's GPUs


def slice_object(uuids: list[str] = UUIDS) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "allowMultipleAllocations": True,
            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}},
            "capacity": {"core": {"value": "100"}, "memory": {"value": "16Gi"}},
        }
        for i, uuid in enumerate(uuids)
    ]
    spec = {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "n1", "generation": 1}, "devices": devices}
    return {"metadata": {"name": "n1-gpus"}, "spec": spec}


def claim_object(name: str, device: str | None, consumed: dict[str, str] | None = None) -> dict[str, Any]:
    """A claim, allocated on `device` of n1 (None: not allocated) as a share (`consumed`) or whole."""
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {}}}
    if device is not None:
        result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}
        if consumed is not None:
            result |= {"shareID": "s", "consumedCapacity": consumed}
        body["status"] = {"allocation": {"devices": {"results": [result]}}}
    return body


def new_cache() -> ClusterCache:
    return ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock()))


def gpus_for(cache: ClusterCache, percent: int) -> list[int]:
    """The GPUs of n1 gpushare's fit finds for a share of `percent` % (and 1 GiB)."""
    table = cache.ledger.table
    return fitting_gpus(table, table.row("n1"), GpuRequest(GpuKind.SHARE, 1, percent * 10, 1024)).tolist()


def test_a_claim_holding_70_percent_of_a_gpu_keeps_a_40_percent_share_off_it_until_deallocated() -> None:
    cache = new_cache()
    cache.on_node("ADDED", node_object("n1", gpus=1))
    cache.on_dra(SLICES)("ADDED", slice_object(UUIDS[:1]))
    assert gpus_for(cache, 40) == [0]
    cache.on_dra(CLAIMS)("ADDED", claim_object("c", None))
    assert gpus_for(cache, 40) == [0]  # not allocated: nothing held
    cache.on_dra(CLAIMS)("MODIFIED", claim_object("c", "gpu-0", {"core": "70", "memory": "4Gi"}))
    assert gpus_for(cache, 40) == []
    assert gpus_for(cache, 30) == [0]
    table = cache.ledger.table
    assert int(table.gmem_free[table.row("n1"), 0]) == 16384 - 4096
    # allocated anew in one event (the deallocation in between not seen): booked as it is now
    cache.on_dra(CLAIMS)("MODIFIED", claim_object("c", "gpu-0", {"core": "50", "memory": "4Gi"}))
    assert gpus_for(cache, 40) == [0]
    assert gpus_for(cache, 60) == []
    cache.on_dra(CLAIMS)("MODIFIED", claim_object("c", None))  # deallocated
    assert gpus_for(cache, 40) == [0]
    cache.on_dra(CLAIMS)("MODIFIED", claim_object("c", "gpu-0", {"core": "70", "memory": "4Gi"}))
    cache.on_dra(CLAIMS)("DELETED", claim_object("c", "gpu-0", {"core": "70", "memory": "4Gi"}))
    assert gpus_for(cache, 40) == [0]
    assert not cache.ledger.bookings()


def test_a_device_taken_whole_books_the_whole_gpu_and_only_its_own() -> None:
    cache = new_cache()
    cache.on_node("ADDED", node_object("n1"))
    cache.on_dra(SLICES)("ADDED", slice_object())
    cache.on_dra(CLAIMS)("ADDED", claim_object("whole", "gpu-1"))
    assert gpus_for(cache, 10) == [0]
    assert cache.recompute().table.core_free.tolist() == cache.ledger.table.core_free.tolist()


def test_a_restarted_cache_books_claims_heard_of_before_their_slices_and_nodes() -> None:
    cache = new_cache()
    cache.on_dra(CLAIMS)("ADDED", claim_object("c", "gpu-0", {"core": "70", "memory": "4Gi"}))
    cache.on_dra(SLICES)("ADDED", slice_object())
    assert not cache.ledger.bookings()  # the node is not known yet
    cache.on_node("ADDED", node_object("n1"))
    assert gpus_for(cache, 40) == [1]
    cache.on_node("DELETED", node_object("n1"))
    cache.on_node("ADDED", node_object("n1"))  # back: booked again
    assert gpus_for(cache, 40) == [1]


def test_a_device_whose_uuid_is_no_gpu_of_the_ledger_books_nothing() -> None:
    cache = new_cache()
    cache.on_node("ADDED", node_object("n1"))
    cache.on_dra(SLICES)("ADDED", slice_object(["GPU-elsewhere", "GPU-other"]))
    cache.on_dra(CLAIMS)("ADDED", claim_object("c", "gpu-0", {"core": "70", "memory": "4Gi"}))
    assert gpus_for(cache, 40) == [0, 1]
    assert not cache.claims.pending
    assert cache.ledger.table.has_node(NodeName("n1"))
