"""What the cluster's nodes could ever give one container: a watch-kept view of their GPUs.

`Fleet` is a value: per node, its GPU count, its largest GPU's memory in the node's own memory units
(the device plugin's `--memory-unit`, published in the node label `labels.memoryUnit`, else the
protocol's), and the MIG profiles its GPUs hold. `FleetView` keeps one up to date from node events
(an informer's ADDED, MODIFIED, DELETED) and hands out the current value; a node without a readable
device annotation counts for nothing. With no node known, `Fleet.known` is False and the request
checks that need the nodes are skipped (a cluster being installed refuses nothing).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from runtimekit.kube.objects import Node, annotations_of, labels_of, meta
from runtimekit.model.gpu import InventoryError, NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.names import memory_unit_mib

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeGpus:
    gpus: int
    memory_units: int  # the largest GPU's memory, in the node's memory units
    unit_mib: int
    mig_profiles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Fleet:
    nodes: tuple[NodeGpus, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.nodes)

    @property
    def most_gpus(self) -> int:
        return max((n.gpus for n in self.nodes), default=0)

    @property
    def most_memory_units(self) -> int:
        """The most memory units one container could get on one GPU of some node."""
        return max((n.memory_units for n in self.nodes), default=0)

    @property
    def mig_profiles(self) -> frozenset[str]:
        return frozenset(p for n in self.nodes for p in n.mig_profiles)


def node_gpus(node: Node, protocol: KitProtocol) -> NodeGpus | None:
    """A node's GPUs from its device annotation; None when it has none the webhook can read."""
    text = annotations_of(node).get(protocol.annotations.node_devices)
    if not text:
        return None
    name = meta(node).get("name", "")
    try:
        inventory = NodeInventory.from_annotation(name, text)
    except InventoryError as exc:
        log.warning("node %s: %s; it counts for nothing", name, exc)
        return None
    unit = protocol.memory_unit_mib
    label = labels_of(node).get(protocol.labels.memory_unit, "") if protocol.labels.memory_unit else ""
    if label:
        try:
            unit = memory_unit_mib(label)
        except ValueError:
            log.warning("node %s: memory unit label %r is not a unit; using the protocol's", name, label)
    largest = max((g.memory_mib for g in inventory.gpus), default=0)
    profiles = frozenset(m.profile for g in inventory.gpus for m in g.mig_devices)
    return NodeGpus(len(inventory.gpus), largest // unit, unit, profiles)


@dataclass
class FleetView:
    """Thread-safe: `on_event` from an informer's thread, `fleet()` from the server's."""

    protocol: KitProtocol
    _nodes: dict[str, NodeGpus] = field(default_factory=dict)
    _fleet: Fleet = field(default_factory=Fleet)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_event(self, kind: str, node: Node) -> None:
        name = meta(node).get("name", "")
        gpus = None if kind == "DELETED" else node_gpus(node, self.protocol)
        with self._lock:
            if gpus is None:
                self._nodes.pop(name, None)
            else:
                self._nodes[name] = gpus
            self._fleet = Fleet(tuple(self._nodes.values()))

    def fleet(self) -> Fleet:
        return self._fleet
