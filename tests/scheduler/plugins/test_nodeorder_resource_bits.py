"""nodeorder's CPU and memory scores (leastrequested, mostrequested, balancedresource) are worked
out per pod over every feasible node in place; they must give the very bits of kube's formulas as
written (`floor((1 - (cpu + mem) / 2) * 100)` ..., summed in that order), or placements would move."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.model import PodKey, PodRequest
from runtimekit.scheduler.framework.info import JobKey, TaskInfo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.nodeorder import FEW_ROWS, NodeOrderPlugin
from scheduler.kubesem.builders import node
from scheduler.plugins.kube_harness import ONLY, cache_of, plugin, session_of

NODES = 12


def reference(
    cpu_total: np.ndarray,
    cpu_free: np.ndarray,
    mem_total: np.ndarray,
    mem_free: np.ndarray,
    request: PodRequest,
    weights: tuple[float, float, float],
) -> np.ndarray:
    """The formulas as nodeorder wrote them before it computed them in place."""
    cpu_cap, mem_cap = np.maximum(cpu_total, 1), np.maximum(mem_total, 1)
    cpu = np.clip((cpu_cap - cpu_free + request.cpu_milli) / cpu_cap, 0, 1)
    mem = np.clip((mem_cap - mem_free + request.memory_bytes) / mem_cap, 0, 1)
    least, most, balanced = weights
    score = np.zeros(cpu.size)
    if least:
        score += least * np.floor((1 - (cpu + mem) / 2) * 100)
    if most:
        score += most * np.floor((cpu + mem) / 2 * 100)
    if balanced:
        score += balanced * np.floor((1 - np.abs(cpu - mem) / 2) * 100)
    return score


WEIGHT = st.sampled_from([0.0, 1.0, 2.0, 0.5, 3.0])


def used_session(totals: list[tuple[int, int]], used: list[float], weights: tuple[float, float, float]) -> Session:
    """A session over NODES nodes with these totals, each used to its share, nodeorder at these weights."""
    arguments = {**ONLY, "leastrequested.weight": weights[0], "mostrequested.weight": weights[1]}
    arguments["balancedresource.weight"] = weights[2]
    ssn = session_of(cache_of([node(f"n{i}") for i in range(NODES)]), nodeorder=arguments)
    table = ssn.table
    for row, ((cpu, mem), share) in enumerate(zip(totals, used, strict=True)):
        table.cpu_total[row], table.mem_total[row] = cpu, mem
        table.cpu_free[row], table.mem_free[row] = cpu - int(cpu * share), mem - int(mem * share)
    return ssn


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 64_000), st.integers(0, 1 << 36)), min_size=NODES, max_size=NODES),
    st.lists(st.floats(0, 1.2), min_size=NODES, max_size=NODES),
    st.tuples(st.integers(0, 70_000), st.integers(0, 1 << 37)),
    st.tuples(WEIGHT, WEIGHT, WEIGHT),
    st.one_of(st.none(), st.sets(st.integers(0, NODES - 1), min_size=1)),
)
def test_resource_scores_have_the_formulas_bits(
    totals: list[tuple[int, int]],
    used: list[float],
    request: tuple[int, int],
    weights: tuple[float, float, float],
    subset: set[int] | None,
) -> None:
    ssn = used_session(totals, used, weights)
    table = ssn.table
    rows = table.active_rows() if subset is None else np.array(sorted(subset), np.int64)  # every row: views
    pod = PodRequest(*request)
    task = TaskInfo(PodKey("p"), "default", "p", JobKey("p"), pod)
    got = plugin(ssn, NodeOrderPlugin).node_order(task, rows, ssn.view)
    want = reference(
        table.cpu_total[rows], table.cpu_free[rows], table.mem_total[rows], table.mem_free[rows], pod, weights
    )
    assert got.dtype == np.float64
    assert got.tobytes() == want.tobytes()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 64_000), st.integers(0, 1 << 36)), min_size=NODES, max_size=NODES),
    st.lists(st.floats(0, 1.2), min_size=NODES, max_size=NODES),
    st.tuples(st.integers(0, 70_000), st.integers(0, 1 << 37)),
    st.tuples(WEIGHT, WEIGHT, WEIGHT),
    st.sets(st.integers(0, NODES - 1), min_size=1, max_size=FEW_ROWS),
)
def test_a_few_rows_score_as_in_a_call_over_every_row(
    totals: list[tuple[int, int]],
    used: list[float],
    request: tuple[int, int],
    weights: tuple[float, float, float],
    few: set[int],
) -> None:
    """The rows a placement changed are rescored alone (on plain floats) when the session keeps the
    others' scores: each must have the bits it has in a call over every row (numpy)."""
    ssn = used_session(totals, used, weights)
    table = ssn.table
    task = TaskInfo(PodKey("p"), "default", "p", JobKey("p"), PodRequest(*request))
    nodeorder = plugin(ssn, NodeOrderPlugin)
    every = nodeorder.node_order(task, table.active_rows(), ssn.view)
    rows = np.array(sorted(few), np.int64)
    assert nodeorder.node_order(task, rows, ssn.view).tobytes() == every[rows].tobytes()
