"""Keep the node's ResourceSlices equal to the runtime's devices, as kube's resourceslice controller does.

The pool is the node (`pool.name` = node name); its devices go in one slice and, when any GPU is in
dynamic MIG mode, their counter sets in a second (Kubernetes 1.35 wants `sharedCounters` in a slice
of their own; 1.34 reads either layout). Slice names are fixed (`<node>-<driver>-devices`,
`...-counters`), each slice is owned by the Node (deleted with it). When what the slices should say
changes, every slice is written again with the pool's `generation` one higher and
`resourceSliceCount` set, so the scheduler never combines slices of two generations; slices no
longer wanted are deleted. Nothing is written while the slices already say it (a restart of the
plugin writes nothing). Called by the plugin's manager after every device change, and retried by it
until it succeeds.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.draplugin.inventory import devices_and_counters
from runtimekit.kube.errors import KubeError, NotFoundError
from runtimekit.kube.objects import Node
from runtimekit.kube.objects.dra import ResourceSlice, ResourceSliceSpec
from runtimekit.kube.objects.meta import OwnerReference

log = logging.getLogger(__name__)


class SliceApi(Protocol):
    def list_slices(self, driver: str, node: str) -> list[ResourceSlice]: ...
    def create_slice(self, body: ResourceSlice) -> ResourceSlice: ...
    def update_slice(self, body: ResourceSlice) -> ResourceSlice: ...
    def delete_slice(self, name: str) -> None: ...
    def get_node(self, node: str) -> Node: ...


def desired_specs(driver: str, node: str, devices: Sequence[pb.Device]) -> dict[str, ResourceSliceSpec]:
    """The slices the pool should have, by name, without their pool generation and count."""
    listed, counter_sets = devices_and_counters(devices)
    base = f"{node}-{driver}"
    specs: dict[str, ResourceSliceSpec] = {f"{base}-devices": {"driver": driver, "nodeName": node, "devices": listed}}
    if counter_sets:
        specs[f"{base}-counters"] = {"driver": driver, "nodeName": node, "sharedCounters": counter_sets}
    return specs


def _without_pool(spec: ResourceSliceSpec) -> ResourceSliceSpec:
    copy = spec.copy()
    copy.pop("pool", None)
    return copy


class SlicePublisher:
    def __init__(self, api: SliceApi, driver: str, node: str) -> None:
        self.api = api
        self.driver = driver
        self.node = node
        self.writes = 0  # slices created, updated or deleted: for tests and logs

    def publish(self, devices: Sequence[pb.Device]) -> bool:
        """Bring the slices up to date; False (after logging why) when the API server refused."""
        try:
            self._publish(devices)
        except KubeError as exc:
            log.warning("cannot publish the ResourceSlices of node %s: %s", self.node, exc)
            return False
        return True

    def _publish(self, devices: Sequence[pb.Device]) -> None:
        wanted = desired_specs(self.driver, self.node, devices)
        existing = {s["metadata"].get("name", ""): s for s in self.api.list_slices(self.driver, self.node)}
        same = existing.keys() == wanted.keys() and all(
            _without_pool(existing[name].get("spec", {})) == spec for name, spec in wanted.items()
        )
        generations = [s.get("spec", {}).get("pool", {}).get("generation", 0) for s in existing.values()]
        if same and len(set(generations)) == 1:
            return
        generation = max(generations, default=0) + 1
        owner = self._owner()
        for name, spec in wanted.items():
            body: ResourceSlice = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name, **({"ownerReferences": [owner]} if owner else {})},
                "spec": {
                    **spec,
                    "pool": {"name": self.node, "generation": generation, "resourceSliceCount": len(wanted)},
                },
            }
            if name in existing:
                body["metadata"]["resourceVersion"] = existing[name]["metadata"].get("resourceVersion", "")
                self.api.update_slice(body)
            else:
                self.api.create_slice(body)
            self.writes += 1
        for name in existing.keys() - wanted.keys():
            with contextlib.suppress(NotFoundError):  # deleted meanwhile: what was wanted
                self.api.delete_slice(name)
            self.writes += 1
        log.info("published %d ResourceSlice(s) of node %s, generation %d", len(wanted), self.node, generation)

    def _owner(self) -> OwnerReference | None:
        try:
            node = self.api.get_node(self.node)
        except NotFoundError:
            return None
        uid = node.get("metadata", {}).get("uid", "")
        if not uid:
            return None
        return {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": uid, "controller": True}
