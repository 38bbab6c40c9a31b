"""The offline bound: hand-worked instances, and on small random ones the exact optimum (found by
exhaustive search) lies between the checked packing and the LP bound."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import Arrivals
from runtimekit.sim.bound import bound_columns, column_events, prefix_bound
from runtimekit.sim.columns import bucket_columns
from runtimekit.sim.feasibility import check
from sim.helpers import instances, optimum, share, whole


@pytest.mark.parametrize(
    ("nodes", "pods", "value"),
    [
        pytest.param(
            [TraceNode("n", 8000, 8192, 1, "T4")], [share("a", 810), share("b", 810)], 810, id="810s-never-share"
        ),
        pytest.param(
            [TraceNode("n", 8000, 8192, 1, "T4")],
            [share("a", 600), share("b", 500), share("c", 400)],
            1000,
            id="best-pair",
        ),
        pytest.param(
            [TraceNode("n", 8000, 8192, 2, "T4")],
            [whole("a", 1, cpu=6000), whole("b", 1, cpu=6000)],
            1000,
            id="cpu-binds-whole-pods",
        ),
        pytest.param(
            [TraceNode("n", 8000, 8192, 2, "T4"), TraceNode("m", 8000, 8192, 4, "V100M16")],
            [whole("eight", 8), whole("four", 4), share("x", 300, spec="P100")],
            4000,
            id="no-host-for-8-gpus-nor-p100",
        ),
        pytest.param(
            [TraceNode("n", 8000, 8192, 2, "T4")],
            [share("a", 500), TracePod("cpu", 8000, 1024, 0, 0), share("b", 500)],
            1000,
            id="cpu-only-pods-are-dropped",
        ),
    ],
)
def test_hand_worked_instances(nodes: list[TraceNode], pods: list[TracePod], value: int) -> None:
    bound, packing = prefix_bound(nodes, pods)
    assert bound.upper == value
    assert bound.lower == value == check(nodes, pods, packing)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_the_optimum_lies_between_the_checked_packing_and_the_bound(
    instance: tuple[list[TraceNode], list[TracePod]],
) -> None:
    nodes, pods = instance
    bound, packing = prefix_bound(nodes, pods, gpu_only=True)
    best = optimum(nodes, pods)
    assert check(nodes, pods, packing) == bound.lower <= best <= bound.upper <= bound.arrived
    assert bound.gpu_only_upper is not None
    assert bound.upper <= bound.gpu_only_upper  # dropping CPU and memory only relaxes


def test_columns_are_bounded_over_the_events_the_replay_averages() -> None:
    """Below full load everything fits: each column's bounds are the arrivals themselves, over the
    same events `bucket_columns` averages."""
    nodes = [TraceNode(f"n{i}", 64000, 262144, 8, "G2") for i in range(4)]
    pods = [share(f"p{i}", 500) for i in range(80)]  # 40 GPUs' worth arriving onto 32
    arrived = [500 * (i + 1) for i in range(80)]
    result = bound_columns(nodes, Arrivals(pods, {}, 0), 1, [50, 100, 125])
    replayed = bucket_columns(arrived, [min(a, 32_000) for a in arrived], 32)
    assert column_events(arrived, 32, 50) == [i for i, a in enumerate(arrived) if round(a / 320) == 50]
    assert result.columns["50"].upper == result.columns["50"].lower == pytest.approx(replayed["50"], abs=0.01)
    assert result.columns["125"].upper == result.columns["125"].lower == pytest.approx(100.0)
