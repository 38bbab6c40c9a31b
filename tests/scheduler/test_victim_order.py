"""Victims in Volcano's order (`BuildVictimsPriorityQueue`): of two jobs of one queue, the job the
priority plugin puts last goes first, whatever the pods' own priorities; of two queues, the queue
last in queue order. Rows of Volcano's TestReclaim, in process."""

from __future__ import annotations

import pytest

from scheduler.live_tables import Row
from scheduler.test_volcano_reclaim_cases import CASES as RECLAIM_CASES
from scheduler.test_volcano_reclaim_cases import EXPECTED as RECLAIM_EXPECTED
from scheduler.volcano_capacity_tree_rows import rows as tree_rows
from scheduler.volcano_cases import bound, run
from scheduler.volcano_more_rows import reclaim_rows


def row(name: str) -> Row:
    return next(r for r in reclaim_rows() if r.name == name)


def test_the_lower_priority_job_gives_its_pod_first() -> None:
    """pg1 (mid) and pg2 (low) in overused queues, every pod of priority 0: pg2's preemptable pod goes,
    though pg1's pods are newer."""
    case = row("sort reclaimees when reclaiming from overusing queue")
    api, _ = run(case.case)
    assert api.evicted == ["c1/preemptee2-1"] == list(case.evicted or [])


def test_the_queue_last_in_order_gives_its_pod_first() -> None:
    case = row("sort reclaimees when reclaiming from overusing queues with different queue priority")
    api, _ = run(case.case)
    assert api.evicted == ["c1/preemptee1-1"] == list(case.evicted or [])


@pytest.mark.parametrize("index", [3])
def test_queue_priority_orders_victims_of_equal_jobs(index: int) -> None:
    """'Node available resources ...': q1 (priority 1) and q2 (priority 2) each hold one pod of an equal
    job; q1's goes."""
    api, _ = run(RECLAIM_CASES[index])
    assert sorted(api.evicted) == RECLAIM_EXPECTED[RECLAIM_CASES[index].name] == ["c1/preemptee1-1"]


def test_reclaim_takes_idle_room_before_evicting() -> None:
    """The capacity tree's case3: p7 (q31, over its deserved share) goes for p8 (q32); once it is gone,
    the next session's reclaim finds p8 room enough on the node and evicts nothing more (Volcano's
    reclaim stops when the node's future idle room takes the task, before its first victim). Before,
    it evicted p5 of q4 as well, a pod Volcano keeps running; and p8, left to allocate rather than
    pipelined again, binds in the room p7 left."""
    row = next(r for r in tree_rows() if r.name.startswith("case3:"))
    api, _ = run(row.case, sessions=3)
    assert api.evicted == ["ns1/p7"] == list(row.evicted or [])
    assert bound(api) == {"ns1/p8": "n1"}
