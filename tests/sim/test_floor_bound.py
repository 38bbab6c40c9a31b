"""The limits with a floor: a packing that must keep some pods, checked against hand-worked instances
and, on small random ones, against the exact optimum under the same requirement; and the floor
limit of a replay, which the reference policy itself must respect."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import Arrivals
from runtimekit.sim.columns import bucket_columns
from runtimekit.sim.floor_bound import SetLimit, floor_columns, kept_relaxation, kept_upper, set_limit, set_upper
from runtimekit.sim.replay import replay, target_workload
from sim.helpers import instances, optimum, share, whole

ONE_GPU = [TraceNode("n", 4000, 8192, 1, "T4")]


@pytest.mark.parametrize(
    ("floor", "value"),
    [(0, 1000), (810, 810), (811, 810)],  # 811: no packing meets it; the LP keeps the 810 at a penalty
    ids=["no-floor-drops-the-810", "floor-keeps-the-810", "unmeetable-floor"],
)
def test_a_floor_on_early_pods_keeps_them(floor: int, value: int) -> None:
    pods = [share("early", 810), whole("late", 1)]
    assert kept_upper(ONE_GPU, pods, [0], floor) == value


def test_the_set_limit_keeps_cpu_only_pods_too() -> None:
    """A CPU-only pod that holds the node's CPU leaves no room for the share pod after it."""
    pods = [TracePod("cpu", 4000, 1024, 0, 0), share("gpu", 500, cpu=1000)]
    assert set_upper(ONE_GPU, pods, [0]) == 0
    assert set_upper(ONE_GPU, pods, []) == 500  # nothing kept: the CPU-only pod is dropped


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.data())
def test_the_exact_optimum_under_a_floor_is_within_the_bound(
    instance: tuple[list[TraceNode], list[TracePod]], data: st.DataObject
) -> None:
    nodes, pods = instance
    kept = frozenset(i for i in range(len(pods)) if data.draw(st.booleans()))
    worth = sum(pods[i].total_gpu_milli for i in kept)
    floor = data.draw(st.integers(0, worth))
    best = optimum(nodes, pods, kept, floor)
    if best < 0:  # no packing meets the floor: nothing to bound
        return
    assert best <= kept_upper(nodes, pods, sorted(kept), floor) <= kept_upper(nodes, pods, sorted(kept), 0)
    # the bound is valid from the first round of column generation on, not only at its end
    relaxation = kept_relaxation(nodes, pods, sorted(kept), floor)
    relaxation.solve_lp(max_iterations=1)
    assert best <= relaxation.upper


def test_the_reference_meets_its_own_floor() -> None:
    """Replaying fgd on a small cluster past full load: at every column fgd's own allocation is within
    the floor limit built from it, which is within what arrived and never above the limit without a
    floor (at the column's last event)."""
    nodes = [TraceNode(f"n{i}", 32_000, 131_072, 2, "V100M16") for i in range(4)]
    sizes = [810, 1000, 470, 230, 810, 650, 1000, 320, 810, 1000]
    pods = [share(f"p{i}", sizes[i % len(sizes)], cpu=2000) for i in range(14)]
    arrivals = Arrivals(pods, {n.name: i for i, n in enumerate(nodes)}, 0)
    reference = replay(nodes, arrivals, "fgd", 1, target_workload(pods))
    columns = [c for c, v in reference.columns.items() if v is not None and int(c) >= 50]
    limits = floor_columns(nodes, pods, reference.used_milli, [int(c) for c in columns], first=50)
    assert set(limits) == set(columns)
    ours = bucket_columns(reference.arrived_milli, reference.used_milli, 8)
    for column, limit in limits.items():
        own = ours[column]
        assert own is not None
        assert own - 0.01 <= limit.upper  # the reference's own column
        arrived = [a / 80 for a in reference.arrived_milli if round(a / 80) == int(column)]
        if arrived:
            assert limit.upper <= max(arrived) + 1e-9
    free = kept_upper(nodes, pods, [], 0) / 80
    assert max(limit.upper for limit in limits.values()) <= free + 1e-9


def test_the_set_limit_names_the_pods_a_better_packing_of_the_kept_ones_leaves_room_for() -> None:
    """Two 470s on two GPUs of a two-GPU node leave no GPU for a whole-GPU pod; packed onto one GPU
    they leave one, so the limit adds that pod (and the 60 milli left beside the 470s fit nothing)."""
    node = [TraceNode("n", 32_000, 65_536, 2, "T4")]
    pods = [share("a", 470), share("b", 470), whole("w", 1)]
    limit = set_limit(node, pods, [0, 1])
    assert (limit.upper, limit.added) == (1940, {"1 GPU": 1000})
    # keeping the whole-GPU pod as well: nothing left to add
    assert set_limit(node, pods, [0, 1, 2]).added == {}
    # with an 810 kept on one GPU and a 470 on the other, a 4-GPU pod never fits the node: no kind of
    # it, so nothing is added, whatever the packing
    big = [share("a", 810), share("b", 470), whole("w", 4)]
    assert set_limit(node, big, [0, 1]) == SetLimit(1280, {})
