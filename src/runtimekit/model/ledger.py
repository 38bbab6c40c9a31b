"""The GPU ledger: a `NodeTable` plus the bookings (which pod holds which placement). It can be
rebuilt from node inventories and pod assignments alone, and never books a placement twice.

Callers: the scheduler cache and session (live and simulated), the tests. Not thread-safe: the
owner serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runtimekit.model.gpu import NodeInventory, NodeName
from runtimekit.model.nodetable import NodeTable
from runtimekit.model.placement import BoolArray, IntArray, LedgerError, NodeCapacity, Placement, PodKey, Slot

__all__ = ["BoolArray", "IntArray", "Ledger", "LedgerError", "NodeCapacity", "NodeTable", "Placement", "PodKey", "Slot"]


class Ledger:
    """A NodeTable plus the bookings: which pod holds which placement."""

    def __init__(self, table: NodeTable | None = None) -> None:
        self.table = table if table is not None else NodeTable()
        self._bookings: dict[PodKey, Placement] = {}
        self._by_node: dict[NodeName, set[PodKey]] = {}

    def booking(self, pod: PodKey) -> Placement | None:
        return self._bookings.get(pod)

    def bookings(self) -> Mapping[PodKey, Placement]:
        return self._bookings

    def pods_on(self, node: str) -> set[PodKey]:
        return set(self._by_node.get(NodeName(node), ()))

    def reserve(self, pod: PodKey, placement: Placement, allow_unusable: bool = False) -> None:
        """Book a placement for a pod. Booking the identical placement again is a no-op;
        a different one for a booked pod is an error (release it first)."""
        held = self._bookings.get(pod)
        if held is not None:
            if held == placement:
                return
            raise LedgerError(f"pod {pod} already holds a placement on {held.node}")
        self.table.take(placement, allow_unusable)
        self._bookings[pod] = placement
        self._by_node.setdefault(placement.node, set()).add(pod)

    def record(self, pod: PodKey, placement: Placement) -> None:
        """Book a placement whose resources the caller has already taken from `table`."""
        if pod in self._bookings:
            raise LedgerError(f"pod {pod} already holds a placement on {self._bookings[pod].node}")
        self._bookings[pod] = placement
        self._by_node.setdefault(placement.node, set()).add(pod)

    def forget(self, pod: PodKey) -> Placement | None:
        """Drop a booking whose resources the caller has already given back to `table`."""
        placement = self._bookings.pop(pod, None)
        if placement is not None:
            self._by_node.get(placement.node, set()).discard(pod)
        return placement

    def release(self, pod: PodKey) -> Placement | None:
        """Give back what a pod holds. Idempotent: releasing an unknown pod returns None."""
        placement = self._bookings.pop(pod, None)
        if placement is None:
            return None
        self._by_node.get(placement.node, set()).discard(pod)
        if self.table.has_node(placement.node):
            self.table.give(placement)
        return placement

    def set_node(self, inventory: NodeInventory, capacity: NodeCapacity) -> list[tuple[PodKey, str]]:
        """Add or update a node. Bookings that no longer fit are dropped and returned with why."""
        count = len(inventory.gpus)
        booked = self._by_node.get(inventory.node, set())
        # a slot of nothing on a GPU that is gone takes no capacity, so only its position gives it away
        if not any(slot.gpu >= count for pod in booked for slot in self._bookings[pod].slots):
            try:
                self.table.set_node(inventory, capacity)
                return []
            except LedgerError:
                pass
        held = {pod: self._bookings[pod] for pod in sorted(booked)}
        for pod in held:
            self.release(pod)
        self.table.set_node(inventory, capacity)
        dropped: list[tuple[PodKey, str]] = []
        for pod, placement in held.items():
            problem = self.table.check(placement, allow_unusable=True)
            if problem:
                dropped.append((pod, problem))
            else:
                self.reserve(pod, placement, allow_unusable=True)
        return dropped

    def remove_node(self, node: str) -> list[PodKey]:
        """Remove a node; its bookings are dropped and returned."""
        pods = sorted(self._by_node.pop(NodeName(node), set()))
        for pod in pods:
            self._bookings.pop(pod, None)
        if self.table.has_node(node):
            self.table.remove_node(node)
        return pods

    @classmethod
    def rebuild(
        cls,
        nodes: Iterable[tuple[NodeInventory, NodeCapacity]],
        pods: Iterable[tuple[PodKey, Placement]],
    ) -> tuple[Ledger, list[tuple[PodKey, str]]]:
        """A ledger from node inventories and pod placements alone, in the order given.

        A placement that does not fit (it would over-commit, or names a missing node or GPU) is not
        booked; it is returned with the reason so the caller can report it.
        """
        ledger = cls()
        for inventory, capacity in nodes:
            ledger.table.set_node(inventory, capacity)
        conflicts: list[tuple[PodKey, str]] = []
        for pod, placement in pods:
            try:
                ledger.reserve(pod, placement, allow_unusable=True)
            except LedgerError as exc:
                conflicts.append((pod, str(exc)))
        return ledger, conflicts
