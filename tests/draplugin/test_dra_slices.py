"""The node's ResourceSlices kept as kube's resourceslice controller keeps a pool: one generation for all
of the pool's slices, resourceSliceCount, counters in a slice of their own, nothing written when nothing
changed, the Node as owner."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

from dra_helpers import DRIVER, NODE, DraStack

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.draplugin.publisher import SlicePublisher
from runtimekit.kube.errors import NotFoundError
from runtimekit.kube.objects import Node
from runtimekit.kube.objects.dra import ResourceSlice
from runtimekit.model import MigMode

Factory = Callable[..., DraStack]


class FakeSlices:
    """ResourceSlices in memory with resourceVersions, and a Node."""

    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self._rv = itertools.count(1)

    def list_slices(self, driver: str, node: str) -> list[ResourceSlice]:
        return [copy.deepcopy(s) for s in self.slices.values() if s["spec"].get("driver") == driver]

    def create_slice(self, body: ResourceSlice) -> ResourceSlice:
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.slices[body["metadata"].get("name", "")] = stored
        return stored

    def update_slice(self, body: ResourceSlice) -> ResourceSlice:
        name = body["metadata"].get("name", "")
        assert self.slices[name]["metadata"].get("resourceVersion") == body["metadata"].get("resourceVersion")
        return self.create_slice(body)

    def delete_slice(self, name: str) -> None:
        if self.slices.pop(name, None) is None:
            raise NotFoundError(name)

    def get_node(self, node: str) -> Node:
        return {"metadata": {"name": node, "uid": "node-uid"}}


def pools(api: FakeSlices) -> set[tuple[int, int]]:
    return {
        (s["spec"].get("pool", {}).get("generation", 0), s["spec"].get("pool", {}).get("resourceSliceCount", 0))
        for s in api.slices.values()
    }


def test_first_publication_and_a_restart_that_writes_nothing(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xH200")
    api = FakeSlices()
    assert SlicePublisher(api, DRIVER, NODE).publish(stack.devices.current())
    (only,) = api.slices.values()
    assert only["metadata"].get("name") == f"{NODE}-{DRIVER}-devices"
    assert only["metadata"].get("ownerReferences") == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid", "controller": True}
    ]
    assert only["spec"].get("nodeName") == NODE
    assert only["spec"].get("pool") == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in only["spec"].get("devices", [])] == ["gpu-0", "gpu-1"]
    again = SlicePublisher(api, DRIVER, NODE)
    assert again.publish(stack.devices.current())
    assert again.writes == 0


def test_a_change_moves_the_whole_pool_to_a_new_generation(dra_stack: Factory) -> None:
    stack = dra_stack(gpus="2xA100-40GB", mig_modes={1: MigMode.DYNAMIC})
    api = FakeSlices()
    publisher = SlicePublisher(api, DRIVER, NODE)
    publisher.publish(stack.devices.current())
    assert sorted(api.slices) == [f"{NODE}-{DRIVER}-counters", f"{NODE}-{DRIVER}-devices"]
    counters = api.slices[f"{NODE}-{DRIVER}-counters"]["spec"]
    assert "devices" not in counters
    assert counters.get("sharedCounters")
    assert pools(api) == {(1, 2)}
    stack.client.inject_fault(pb.FAULT_KIND_XID, 1, xid=79)  # the MIG GPU goes: so do its counters
    publisher.publish(stack.client.list_devices())
    assert sorted(api.slices) == [f"{NODE}-{DRIVER}-devices"]
    assert pools(api) == {(2, 1)}
    assert [d["name"] for d in api.slices[f"{NODE}-{DRIVER}-devices"]["spec"].get("devices", [])] == ["gpu-0"]
