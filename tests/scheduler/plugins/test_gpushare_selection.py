"""A pod's GPU constraints applied to the node table: a copy in which the GPUs it may not use are
unusable (an unhealthy GPU stays so), what is booked stays booked, the session's table is untouched,
and nodes without an allowed GPU are told apart by why."""

from __future__ import annotations

import numpy as np

from runtimekit.model import GpuSelector, NodeCapacity, NodeInventory, NodeName, NodeTable, Placement, Slot
from runtimekit.scheduler.plugins.gpushare.selection import restrict


def table() -> NodeTable:
    out = NodeTable()
    a100 = NodeInventory.simulated("a", "A100-80GB", 3)
    out.add_node(a100.with_health([a100.gpus[2].uuid]), NodeCapacity(64000, 10**6 << 20, 110))
    out.add_node(NodeInventory.simulated("h", "H200", 2), NodeCapacity(64000, 10**6 << 20, 110))
    out.take(Placement(NodeName("a"), 1000, 0, (Slot(0, 300, 4096),)))
    return out


def test_ruled_out_gpus_become_unusable_and_bookings_stay() -> None:
    session = table()
    a = session.inventory("a")
    before = session.usable.copy(), session.core_free.copy(), session.gpu_whole.copy()
    selector = GpuSelector(uuids_avoided=(a.gpus[1].uuid,), uuid_keys=("x/nouse",))
    found = restrict(session, selector)
    row = session.row("a")
    assert found.table.usable[row, :3].tolist() == [True, False, False]  # GPU 2 was unhealthy already
    assert found.table.core_free[row, 0] == 700
    assert found.table.gpu_whole[row] == 0  # the summaries follow: GPU 0 is shared, GPU 1 ruled out
    assert found.table.gpu_whole[session.row("h")] == 2
    assert not found.no_model.any()
    assert not found.no_uuid.any()
    for kept, now in zip(before, (session.usable, session.core_free, session.gpu_whole), strict=True):
        assert np.array_equal(kept, now)


def test_nodes_without_an_allowed_gpu_are_told_apart() -> None:
    session = table()
    h = session.inventory("h")
    by_model = restrict(session, GpuSelector(models=("H200",), contains=True))
    assert by_model.no_model.tolist()[: session.rows] == [True, False]
    by_uuid = restrict(session, GpuSelector(uuids=(h.gpus[0].uuid,)))
    assert by_uuid.no_uuid.tolist()[: session.rows] == [True, False]
    assert by_uuid.table.usable[session.row("h"), :2].tolist() == [True, False]
