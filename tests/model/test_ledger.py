"""Ledger invariants under random operation sequences, and the cases worth naming."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from runtimekit.model import (
    MILLI,
    Assignment,
    GpuShare,
    Ledger,
    LedgerError,
    NodeCapacity,
    NodeInventory,
    NodeName,
    Placement,
    PodKey,
    Slot,
    placement_from_assignment,
)

CAP = NodeCapacity(cpu_milli=8000, memory_bytes=32768 << 20, pods=6, scalars=(("example.com/foo", 4),))
FOO = "example.com/foo"


def inventory(name: str, gpus: int = 2, memory: int = 16384) -> NodeInventory:
    return NodeInventory.simulated(name, "T4", gpus, memory)


def test_reserve_is_all_or_nothing() -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1"), CAP)
    before = ledger.table.copy()
    too_much = Placement(NodeName("n1"), 100, 100, (Slot(0, 600, 100), Slot(1, 1200, 0)))
    with pytest.raises(LedgerError, match="more than one GPU"):
        ledger.reserve(PodKey("p"), too_much)
    over = Placement(NodeName("n1"), 100, 100, (Slot(0, 600, 100), Slot(0, 600, 100)))
    with pytest.raises(LedgerError, match="insufficient GPU share"):
        ledger.reserve(PodKey("p"), over)
    assert ledger.booking(PodKey("p")) is None
    for name in ("cpu_free", "mem_free", "pods_free", "core_free", "gmem_free"):
        np.testing.assert_array_equal(getattr(ledger.table, name), getattr(before, name))


@pytest.mark.parametrize(
    ("placement", "reason"),
    [
        pytest.param(Placement(NodeName("nope")), "unknown node", id="unknown-node"),
        pytest.param(Placement(NodeName("n1"), 9000), "insufficient cpu", id="cpu"),
        pytest.param(Placement(NodeName("n1"), 0, 40000 << 20), "insufficient memory", id="memory"),
        pytest.param(Placement(NodeName("n1"), slots=(Slot(5, 10, 0),)), "no GPU at position 5", id="gpu-position"),
        pytest.param(Placement(NodeName("n1"), slots=(Slot(0, -1, 0),)), "must not be negative", id="negative"),
        pytest.param(Placement(NodeName("n1"), slots=(Slot(0, 100, 20000),)), "MiB GPU", id="memory-above-gpu"),
    ],
)
def test_invalid_placements_are_rejected_with_a_reason(placement: Placement, reason: str) -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1"), CAP)
    with pytest.raises(LedgerError, match=reason):
        ledger.reserve(PodKey("p"), placement)


def test_reserve_is_idempotent_and_release_too() -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1"), CAP)
    placement = Placement(NodeName("n1"), 1000, 1024, (Slot(1, 500, 4096),))
    ledger.reserve(PodKey("p"), placement)
    ledger.reserve(PodKey("p"), placement)
    assert ledger.table.free_gpus("n1") == [(1000, 16384), (500, 12288)]
    with pytest.raises(LedgerError, match="already holds"):
        ledger.reserve(PodKey("p"), Placement(NodeName("n1"), slots=(Slot(0, 100, 0),)))
    assert ledger.release(PodKey("p")) == placement
    assert ledger.release(PodKey("p")) is None
    assert ledger.table.free_gpus("n1") == [(1000, 16384), (1000, 16384)]


def test_unhealthy_gpu_refuses_new_placements_but_keeps_bookings() -> None:
    ledger = Ledger()
    inv = inventory("n1")
    ledger.set_node(inv, CAP)
    ledger.reserve(PodKey("p"), Placement(NodeName("n1"), slots=(Slot(0, 300, 0),)))
    ledger.set_node(inv.with_health([inv.gpus[0].uuid]), CAP)
    assert ledger.booking(PodKey("p")) is not None
    with pytest.raises(LedgerError, match="unhealthy"):
        ledger.reserve(PodKey("q"), Placement(NodeName("n1"), slots=(Slot(0, 100, 0),)))
    assert ledger.table.gpu_sum[ledger.table.row("n1")] == MILLI  # only the healthy GPU counts as free


def test_shrinking_a_node_drops_bookings_that_no_longer_fit() -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1", gpus=2), CAP)
    ledger.reserve(PodKey("a"), Placement(NodeName("n1"), slots=(Slot(0, 500, 0),)))
    ledger.reserve(PodKey("b"), Placement(NodeName("n1"), slots=(Slot(1, 500, 0),)))
    dropped = ledger.set_node(inventory("n1", gpus=1), CAP)
    assert [pod for pod, _ in dropped] == ["b"]
    assert ledger.booking(PodKey("a")) is not None
    assert ledger.table.free_gpus("n1") == [(500, 16384)]


def test_a_booking_of_nothing_on_a_removed_gpu_is_dropped_too() -> None:
    """Such a slot takes no capacity, so only its GPU position shows it no longer fits (found by
    the state machine below: the ledger kept it and a rebuild refused it)."""
    ledger = Ledger()
    ledger.set_node(inventory("n1", gpus=1), CAP)
    ledger.reserve(PodKey("a"), Placement(NodeName("n1"), slots=(Slot(0, 0, 0),)))
    dropped = ledger.set_node(inventory("n1", gpus=0), CAP)
    assert dropped == [(PodKey("a"), "node 'n1' has no GPU at position 0")]
    assert ledger.booking(PodKey("a")) is None


def test_rebuild_from_assignments_reports_conflicts() -> None:
    inv = inventory("n1")
    share = GpuShare(inv.gpus[0].uuid, 0, 700, 0)
    a = placement_from_assignment(Assignment(NodeName("n1"), {"c": (share,)}), inv)
    b = placement_from_assignment(Assignment(NodeName("n1"), {"c": (share,)}), inv)
    ledger, conflicts = Ledger.rebuild([(inv, CAP)], [(PodKey("a"), a), (PodKey("b"), b)])
    assert [pod for pod, _ in conflicts] == ["b"]
    assert ledger.table.free_gpus("n1")[0] == (300, 16384)


def test_snapshot_copies_do_not_leak() -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1"), CAP)
    snap = ledger.table.copy()
    snap.take(Placement(NodeName("n1"), 100, 0, (Slot(0, 400, 0),)))
    assert ledger.table.free_gpus("n1")[0] == (1000, 16384)
    ledger.set_node(inventory("n2"), CAP)
    assert not snap.has_node("n2")


def test_scalar_resources_are_taken_given_back_and_kept_across_a_node_update() -> None:
    ledger = Ledger()
    ledger.set_node(inventory("n1"), CAP)
    ledger.reserve(PodKey("a"), Placement(NodeName("n1"), scalars=((FOO, 3),)))
    row = ledger.table.row("n1")
    assert ledger.table.scalar_free[FOO][row] == 1
    with pytest.raises(LedgerError, match=f"insufficient {FOO} on n1"):
        ledger.reserve(PodKey("b"), Placement(NodeName("n1"), scalars=((FOO, 2),)))
    with pytest.raises(LedgerError, match="insufficient example.com/bar on n1"):
        ledger.reserve(PodKey("c"), Placement(NodeName("n1"), scalars=(("example.com/bar", 1),)))
    ledger.set_node(inventory("n1"), NodeCapacity(8000, 32768 << 20, 6, ((FOO, 10),)))
    assert ledger.table.scalar_free[FOO][row] == 7  # the booking survives the update
    dropped = ledger.set_node(inventory("n1"), NodeCapacity(8000, 32768 << 20, 6, ((FOO, 2),)))
    assert [pod for pod, _ in dropped] == ["a"]
    assert ledger.table.scalar_free[FOO][row] == 2


class LedgerMachine(RuleBasedStateMachine):
    """Random add/reserve/release/update/remove sequences; the ledger always equals a
    recomputation from its bookings and never leaves [0, capacity]."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = Ledger()
        self.inventories: dict[str, NodeInventory] = {}
        self.next_pod = 0

    @rule(name=st.sampled_from(["a", "b", "c"]), gpus=st.integers(0, 4), memory=st.sampled_from([8192, 16384]))
    def set_node(self, name: str, gpus: int, memory: int) -> None:
        inv = inventory(name, gpus, memory)
        self.ledger.set_node(inv, CAP)
        self.inventories[name] = inv

    @precondition(lambda self: self.inventories)
    @rule(data=st.data())
    def reserve(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.inventories)))
        gpus = len(self.inventories[name].gpus)
        slots = data.draw(
            st.lists(
                st.builds(Slot, st.integers(0, max(gpus - 1, 0)), st.integers(0, 1000), st.integers(0, 9000)),
                max_size=3,
            )
        )
        scalars = data.draw(st.sampled_from([(), ((FOO, 1),), ((FOO, 3),), (("example.com/bar", 1),)]))
        placement = Placement(
            NodeName(name), data.draw(st.integers(0, 5000)), data.draw(st.integers(0, 20000)), tuple(slots), scalars
        )
        self.next_pod += 1
        before = self.ledger.table.copy()
        try:
            self.ledger.reserve(PodKey(f"p{self.next_pod}"), placement)
        except LedgerError:
            for field in ("cpu_free", "mem_free", "pods_free", "core_free", "gmem_free"):
                np.testing.assert_array_equal(getattr(self.ledger.table, field), getattr(before, field))
            np.testing.assert_array_equal(self.ledger.table.scalar_free[FOO], before.scalar_free[FOO])

    @precondition(lambda self: self.ledger.bookings())
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        pod = data.draw(st.sampled_from(sorted(self.ledger.bookings())))
        self.ledger.release(pod)

    @precondition(lambda self: self.inventories)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.inventories)))
        self.ledger.remove_node(name)
        del self.inventories[name]

    @precondition(lambda self: self.inventories)
    @rule(data=st.data())
    def toggle_health(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.inventories)))
        inv = self.inventories[name]
        bad = [g.uuid for g in inv.gpus if data.draw(st.booleans())]
        self.inventories[name] = inv.with_health(bad)
        self.ledger.set_node(self.inventories[name], CAP)

    @invariant()
    def matches_recomputation(self) -> None:
        table = self.ledger.table
        rebuilt, conflicts = Ledger.rebuild(
            [(inv, CAP) for inv in self.inventories.values()],
            sorted(self.ledger.bookings().items()),
        )
        assert conflicts == []
        for name in self.inventories:
            row, other = table.row(name), rebuilt.table.row(name)
            count = len(self.inventories[name].gpus)
            assert table.free_gpus(name) == rebuilt.table.free_gpus(name)
            assert table.cpu_free[row] == rebuilt.table.cpu_free[other]
            assert table.pods_free[row] == rebuilt.table.pods_free[other]
            assert 0 <= table.cpu_free[row] <= CAP.cpu_milli
            assert (table.core_free[row, :count] >= 0).all()
            assert (table.core_free[row, :count] <= MILLI).all()
            assert (table.gmem_free[row, :count] >= 0).all()
            assert (table.gmem_free[row, :count] <= table.gmem_total[row, :count]).all()
            usable = table.usable[row, :count]
            assert table.gpu_sum[row] == table.core_free[row, :count][usable].sum()
            assert table.gpu_usable[row] == usable.sum()
            assert table.gpu_room[row] == (table.core_free[row, :count][usable] > 0).sum()
            assert table.cpu_room[row] == (table.cpu_free[row] if table.pods_free[row] > 0 else -1)
            assert 0 <= table.scalar_free[FOO][row] == rebuilt.table.scalar_free[FOO][other] <= 4
            assert table.version[row] == rebuilt.table.version[other]  # a hash of the content alone


TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
