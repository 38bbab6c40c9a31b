"""Volcano's scheduler test cases as rows for the end-to-end runner (live_tables.py): the cases
translated in the table test modules (allocate, preempt, reclaim), in volcano_more_rows.py and in
volcano_capacity_rows.py, volcano_capacity_tree_rows.py, volcano_dra_rows.py and volcano_strategyfit_rows.py, each with
Volcano's expectation.
Imported by test_peer_tables_live.py and scripts/peer_tables.py."""

from __future__ import annotations

from scheduler import test_volcano_allocate_cases as allocate
from scheduler import test_volcano_preempt_cases as preempt
from scheduler import test_volcano_reclaim_cases as reclaim
from scheduler import volcano_capacity_rows as capacity
from scheduler import volcano_capacity_tree_rows as capacity_tree
from scheduler import volcano_dra_rows as dra
from scheduler import volcano_more_rows as more
from scheduler import volcano_strategyfit_rows as strategyfit
from scheduler.live_tables import Row


def rows() -> list[Row]:
    out = [Row("volcano/allocate", c, binds=allocate.EXPECTED[c.name], evicted=[]) for c in allocate.CASES]
    out += [Row("volcano/preempt", c, evicted=preempt.EXPECTED[c.name]) for c in preempt.CASES]
    out += [Row("volcano/reclaim", c, evicted=reclaim.EXPECTED[c.name]) for c in reclaim.CASES]
    return out + more.rows() + capacity.rows() + capacity_tree.rows() + dra.rows() + strategyfit.rows()
