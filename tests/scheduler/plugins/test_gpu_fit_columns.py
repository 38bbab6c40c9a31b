"""The GPU fit over the node table's columns (`plugins/gpushare/fit.py`) answers as the one-GPU rule
`GpuRequest.memory_on` and a plain count do, whichever way it reads the columns: every row (views),
some rows in any order (copies by `take`), eight GPUs a row (bit counts) or another width."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.model import GpuKind, GpuRequest, NodeInventory, NodeName, NodeTable, Placement, Slot
from runtimekit.model.placement import NodeCapacity
from runtimekit.scheduler.plugins.gpushare.fit import count_per_row, fit_rows, gpu_ok, memory_fits

REQUESTS = [
    GpuRequest(GpuKind.SHARE, 1, 300),  # memory in proportion to the compute share
    GpuRequest(GpuKind.SHARE, 2, 250),
    GpuRequest(GpuKind.SHARE, 1, 500, memory_percent=30),
    GpuRequest(GpuKind.SHARE, 1, 100, memory_mib=4000),
    GpuRequest(GpuKind.SHARE, 1, 0, memory_mib=0),
    GpuRequest(GpuKind.WHOLE, 1),
    GpuRequest(GpuKind.WHOLE, 3),
]


@settings(max_examples=300, deadline=None)
@given(
    free=st.integers(-(10**6), 10**6),
    total=st.integers(0, 10**6),
    core=st.integers(0, 1000),
    percent=st.one_of(st.none(), st.integers(0, 100)),
    mib=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_memory_fits_is_the_one_gpu_rule_without_division(
    free: int, total: int, core: int, percent: int | None, mib: int | None
) -> None:
    req = GpuRequest(GpuKind.SHARE, 1, core, memory_mib=mib, memory_percent=percent)
    fits = memory_fits(req, np.array([[free]], np.int64), np.array([[total]], np.int64))
    assert bool(fits[0, 0]) == (free >= req.memory_on(total))


@pytest.mark.parametrize("width", [8, 4, 12])
def test_count_per_row_counts_the_marked_gpus(width: int) -> None:
    mask = np.random.default_rng(width).random((300, width)) < 0.4
    assert count_per_row(mask).tolist() == mask.sum(axis=1).tolist()
    every_other = mask[:, ::2]  # not contiguous: counted the plain way
    assert count_per_row(every_other).tolist() == every_other.sum(axis=1).tolist()


def _table(seed: int) -> NodeTable:
    """Nodes of 8 and of 4 GPUs with 16 and 80 GB, part-booked at random, one GPU unusable."""
    rng = np.random.default_rng(seed)
    table = NodeTable()
    for i in range(60):
        count, memory = (8, 16384) if i % 3 else (4, 81920)
        name = f"n{i:02d}"
        table.add_node(NodeInventory.simulated(name, "T4", count, memory), NodeCapacity(64_000, 10**12, 110))
        slots = []
        for gpu in range(count):
            used = int(rng.choice([0, 0, 100, 250, 500, 700, 1000]))
            if used:
                slots.append(Slot(gpu, used, int(rng.integers(0, memory + 1))))
        table.take(Placement(NodeName(name), 1000, 0, tuple(slots)))
    table.usable[5, 1] = False
    return table


def _by_hand(table: NodeTable, rows: np.ndarray, req: GpuRequest) -> list[bool]:
    """Row by row, GPU by GPU: enough GPUs that can each hold one unit of the request."""
    out = []
    for row in rows.tolist():
        fitting = 0
        for gpu in range(int(table.gpu_count[row])):
            core, free, total = (int(a[row, gpu]) for a in (table.core_free, table.gmem_free, table.gmem_total))
            if not table.usable[row, gpu]:
                continue
            if req.kind is GpuKind.WHOLE:
                fitting += core == 1000 and free == total
            else:
                fitting += core >= req.core_milli and free >= req.memory_on(total)
        out.append(fitting >= req.count)
    return out


@pytest.mark.parametrize("req", REQUESTS, ids=str)
def test_fit_over_every_row_and_over_some_rows_is_the_rule_gpu_by_gpu(req: GpuRequest) -> None:
    table = _table(7)
    every = table.active_rows()
    assert table.all_active(every)
    some = np.array([41, 3, 3, 17, 0, 59, 22], np.int64)  # any order, a row twice
    for rows in (every, some):
        passed, _ = fit_rows(table, rows, req)
        assert passed.tolist() == _by_hand(table, rows, req)
        ok, _ = gpu_ok(table, rows, req)
        assert ok.shape == (rows.size, table.width)
