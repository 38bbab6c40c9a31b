"""The shared GPU ledger, DRA side: a DRA device whose `uuid` is a GPU of the node's gpushare ledger
row counts what the device plugin's share pods hold there as consumed capacity, so a claim never
gets more of the GPU than is left (docs/user-guide/dra.md)."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from runtimekit.kube.objects import ResourceClaim
from runtimekit.model import NodeName
from runtimekit.model.gpu import NodeInventory
from runtimekit.model.nodetable import NodeTable
from runtimekit.model.placement import NodeCapacity, Placement, Slot
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework.info import NodeMeta, TaskInfo
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem.dra import DraCatalog
from runtimekit.scheduler.kubesem.draledger import ledger_consumed
from runtimekit.scheduler.plugins.dra import DynamicResources

P = KitProtocol.default()
DRIVER = "gpu.runtimekit.aliyun.com"
CLASS = {"metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
INVENTORY = NodeInventory.simulated("n1", "T4", 2, 16384)
UUIDS = [gpu.uuid for gpu in INVENTORY.gpus]
GIB = 1 << 30


def device(name: str, uuid: str | None, shareable: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "capacity": {"core": {"value": "100"}, "memory": {"value": "16Gi"}}}
    if uuid is not None:
        out["attributes"] = {"uuid": {"string": uuid}}
    if shareable:
        out["allowMultipleAllocations"] = True
    return out


def catalog(devices: list[dict[str, Any]], *claims: ResourceClaim) -> DraCatalog:
    slice_ = {
        "metadata": {"name": "n1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    keys = {f"default/{c['metadata']['name']}": c for c in claims}
    return DraCatalog(keys, {DRIVER: cast(Any, CLASS)}, (cast(Any, slice_),), 1)


def table(*slots: Slot) -> NodeTable:
    """Node n1 (two T4s, 16 GiB each) with the device plugin's shares `slots` booked."""
    out = NodeTable()
    out.add_node(INVENTORY, NodeCapacity(64_000, 64 * GIB, 110))
    if slots:
        out.take(Placement(NodeName("n1"), 1000, 0, slots))
    return out


def claim(name: str, core: str) -> ResourceClaim:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "capacity": {"requests": {"core": core}}}}
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [request]}}}
    return cast(ResourceClaim, body)


def pod_task(name: str, claim_name: str) -> TaskInfo:
    pod = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}], "containers": [{"name": "c"}]},
    }
    task = task_from_pod(cast(Any, pod), P)
    task.node = NodeName("n1")
    return task


def fits(core: str, ledger: NodeTable, devices: list[dict[str, Any]]) -> bool:
    plugin = DynamicResources()
    snapshot = SimpleNamespace(dra=catalog(devices, claim("c", core)), meta=[NodeMeta(NodeName("n1"))])
    ssn = cast(SessionView, SimpleNamespace(snapshot=snapshot, table=ledger))
    passed = plugin.predicate(pod_task("p", "c"), np.array([0], np.int64), ssn).passed.tolist() == [True]
    assert plugin.reserve(pod_task("p", "c"), DeviceChoice(), ssn).ok is passed  # Reserve agrees
    return passed


def test_device_plugin_shares_of_a_gpu_are_consumed_capacity_of_its_dra_device() -> None:
    ledger = table(Slot(0, 700, 4096))  # 70 % of GPU 0's core and 4 GiB of its memory
    devices = [device("gpu-0", UUIDS[0]), device("gpu-1", UUIDS[1]), device("other", None)]
    assert ledger_consumed(ledger, "n1", catalog(devices).pools, catalog(devices).by_uuid) == {
        (DRIVER, "n1", "gpu-0"): {f"{DRIVER}/core": Fraction(70), f"{DRIVER}/memory": Fraction(4 * GIB)}
    }
    assert ledger_consumed(ledger, "gone", catalog(devices).pools, catalog(devices).by_uuid) == {}


def test_a_claim_gets_no_more_than_the_device_plugin_left_on_the_gpu() -> None:
    shared = [device("gpu-0", UUIDS[0])]
    assert fits("40", table(), shared)  # nothing held: 40 % fits
    held = table(Slot(0, 400, 0), Slot(0, 300, 0))  # two share pods hold 70 %
    assert not fits("40", held, shared)
    assert fits("30", held, shared)
    # a device with another UUID is another GPU: nothing of GPU 0's shares is consumed there
    assert fits("40", held, [device("gpu-0", UUIDS[1])])


def test_a_gpu_the_device_plugin_shares_is_not_granted_whole_through_dra() -> None:
    whole = [device("gpu-0", UUIDS[0], shareable=False)]
    assert fits("1", table(), whole)
    assert not fits("1", table(Slot(0, 100, 0)), whole)
