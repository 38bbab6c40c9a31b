"""The node's GPUs as DRA devices: shareable GPUs (consumable capacity), MIG placements as partitionable
devices over counters, static MIG devices, health; and a MIG placement prepared through the runtime."""

from __future__ import annotations

from collections.abc import Callable

from dra_helpers import DRIVER, NODE, DraStack, claim

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.cluster.kubelet.draplugins import ClaimKey
from runtimekit.draplugin.inventory import devices_and_counters, targets
from runtimekit.model import MigMode, simulated_uuid

Factory = Callable[..., DraStack]
A100_40 = 40960


def test_a_gpu_with_mig_off_is_one_shareable_device(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="1xH200")
    (device,), counters = devices_and_counters(stack.devices.current())
    assert counters == []
    assert device["name"] == "gpu-0"
    assert device.get("allowMultipleAllocations") is True
    attributes = device.get("attributes", {})
    assert attributes["type"] == {"string": "gpu"}
    assert attributes["uuid"] == {"string": simulated_uuid(NODE, 0)}
    assert attributes["productName"] == {"string": "NVIDIA H200"}
    assert attributes["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attributes["migCapable"] == {"bool": True}
    capacity = device.get("capacity", {})
    assert capacity["core"] == {
        "value": "100",
        "requestPolicy": {"default": "100", "validRange": {"min": "1", "step": "1"}},
    }
    assert capacity["memory"]["value"] == "143771Mi"
    assert capacity["memory"].get("requestPolicy", {}).get("default") == "143771Mi"
    assert "consumesCounters" not in device


def test_dynamic_mig_offers_every_placement_over_the_gpus_counters(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xA100-40GB", mig_modes={1: MigMode.DYNAMIC})
    devices, (counter_set,) = devices_and_counters(stack.devices.current())
    by_name = {d["name"]: d for d in devices}
    assert counter_set["name"] == "gpu-1-counters"
    full = counter_set.get("counters", {})
    assert {f"memorySlice{i}" for i in range(8)} <= full.keys()
    assert full["computeSlices"] == {"value": "7"}
    # 7 + 4 + 3 + 2 + 1 + 1 placements of the six A100-40GB profiles, the whole GPU, and GPU 0
    assert len([n for n in by_name if n.startswith("gpu-1-mig-")]) == 18
    whole = by_name["gpu-1"]
    assert "allowMultipleAllocations" not in whole  # a partitioned GPU is whole or cut, never shared
    assert whole.get("consumesCounters", [])[0].get("counters") == full
    mig = by_name["gpu-1-mig-3g-20gb-4"]
    assert mig.get("attributes", {})["profile"] == {"string": "3g.20gb"}
    assert mig.get("attributes", {})["parentUUID"] == {"string": simulated_uuid(NODE, 1)}
    used = mig.get("consumesCounters", [])[0].get("counters", {})
    assert {k for k in used if k.startswith("memorySlice")} == {f"memorySlice{i}" for i in range(4, 8)}
    assert used["computeSlices"] == {"value": "3"}
    assert by_name["gpu-0"].get("allowMultipleAllocations") is True


def test_static_mig_offers_the_existing_devices_only(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="1xA100-40GB", mig_layouts={0: ["3g.20gb", "3g.20gb"]})
    devices, counters = devices_and_counters(stack.devices.current())
    assert counters == []
    assert sorted(d["name"] for d in devices) == ["gpu-0-mig-3g-20gb-0", "gpu-0-mig-3g-20gb-4"]
    assert all(d.get("attributes", {})["uuid"]["string"].startswith("MIG-") for d in devices)


def test_an_unhealthy_gpu_leaves_the_inventory(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xH200")
    stack.client.inject_fault(pb.FAULT_KIND_XID, 1, xid=79)
    assert sorted(targets(stack.client.list_devices())) == ["gpu-0"]


def test_a_mig_placement_is_made_by_the_runtime_when_prepared(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="1xA100-40GB", mig_modes={0: MigMode.DYNAMIC})
    stack.claims.add(claim("mig", "uid-m", [{"request": "mig-1g", "device": "gpu-0-mig-1g-5gb-3"}]))
    watcher = stack.serve()
    answer = watcher.plugins[DRIVER].prepare([ClaimKey("default", "uid-m", "mig")])["uid-m"]
    assert answer.error == ""
    (held,) = stack.client.list_allocations()
    (share,) = held.shares
    assert (share.parent_uuid, share.mig_profile, share.mig_start) == (simulated_uuid(NODE, 0), "1g.5gb", 3)
    made = [m for d in stack.client.list_devices() for m in d.mig_devices if m.dynamic]
    assert [(m.profile, m.start) for m in made] == [("1g.5gb", 3)]
    assert watcher.plugins[DRIVER].unprepare([ClaimKey("default", "uid-m", "mig")]) == {"uid-m": ""}
    assert not [m for d in stack.client.list_devices() for m in d.mig_devices if m.dynamic]
