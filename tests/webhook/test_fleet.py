"""The watch-kept view of the nodes' GPUs: inventories read from the device annotation, memory in each
node's own unit, MIG profiles the nodes show, nodes that leave or have no readable inventory."""

from __future__ import annotations

from runtimekit.model.gpu import Gpu, GpuUUID, MigInstance, MigMode, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.webhook.fleet import FleetView

P = KitProtocol.default()


def node(name: str, inventory: NodeInventory | None, unit: str = "") -> dict[str, object]:
    annotations = {P.annotations.node_devices: inventory.to_annotation()} if inventory is not None else {}
    labels = {P.labels.memory_unit: unit} if unit else {}
    return {"metadata": {"name": name, "annotations": annotations, "labels": labels}}


def test_the_view_follows_node_events() -> None:
    view = FleetView(P)
    assert not view.fleet().known
    view.on_event("ADDED", node("a", NodeInventory.simulated("a", "H200", 8)))
    view.on_event("ADDED", node("b", NodeInventory.simulated("b", "A100-80GB", 2), unit="512Mi"))
    fleet = view.fleet()
    assert (fleet.most_gpus, fleet.most_memory_units) == (8, 160)  # 81920 MiB in 512 MiB units beats 140 GiB
    view.on_event("DELETED", node("b", None))
    assert view.fleet().most_memory_units == 140
    view.on_event("MODIFIED", node("a", None))  # no inventory any more: counts for nothing
    assert not view.fleet().known


def test_a_bad_annotation_counts_for_nothing() -> None:
    view = FleetView(P)
    view.on_event("ADDED", {"metadata": {"name": "x", "annotations": {P.annotations.node_devices: "not json"}}})
    assert not view.fleet().known


def test_mig_profiles_come_from_the_nodes() -> None:
    gpu = Gpu(
        0,
        GpuUUID("GPU-1"),
        "A100-80GB",
        81920,
        mig_mode=MigMode.STATIC,
        mig_devices=(MigInstance("MIG-1", "3g.40gb", 0),),
    )
    view = FleetView(P)
    view.on_event("ADDED", node("m", NodeInventory(NodeName("m"), (gpu,))))
    assert view.fleet().mig_profiles == frozenset({"3g.40gb"})
