"""The pattern LP of the offline bound: the pricing knapsack fills one GPU exactly, and the bound
holds from the first round of column generation and tightens."""

from __future__ import annotations

import pytest

from runtimekit.model.knapsack import best_pattern
from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.bound_model import Relaxation, build_instance
from sim.helpers import optimum, share


@pytest.mark.parametrize(
    ("profit", "sizes", "expected"),
    [
        pytest.param([1.0, 3.0], [500, 810], (3.0, (0, 1)), id="one-big"),
        pytest.param([1.0, 1.5], [500, 810], (2.0, (2, 0)), id="two-halves"),
        pytest.param([0.15, 1.0], [200, 810], (1.0, (0, 1)), id="gap-too-small"),
        pytest.param([0.0, 0.0], [200, 810], (0.0, (0, 0)), id="nothing-pays"),
    ],
)
def test_best_pattern_fills_one_gpu_exactly(
    profit: list[float], sizes: list[int], expected: tuple[float, tuple[int, ...]]
) -> None:
    assert best_pattern(profit, sizes, 10) == expected


def test_the_lp_bound_holds_at_every_iteration_and_tightens() -> None:
    nodes = [TraceNode(f"n{i}", 64000, 65536, 2, "T4") for i in range(3)]
    pods = [share(f"p{i}", m) for i, m in enumerate([810, 470, 470, 320, 650, 230, 160, 810, 550, 460])]
    relaxation = Relaxation(build_instance(nodes, pods))
    relaxation.solve_lp(max_iterations=1)  # start patterns only: a weak but valid bound
    first = relaxation.upper
    relaxation.solve_lp()
    assert optimum(nodes, pods) <= relaxation.upper <= first


def test_the_lp_says_how_many_pods_of_each_kind_it_places() -> None:
    """Three 470s and a whole-GPU pod on one two-GPU node: the LP places two 470s on one GPU and
    the whole pod on the other (1,940 milli); the third 470 has no room."""
    nodes = [TraceNode("n", 64_000, 65_536, 2, "T4")]
    pods = [share("a", 470), share("b", 470), share("c", 470), TracePod("w", 1000, 1024, 1, 1000)]
    relaxation = Relaxation(build_instance(nodes, pods))
    relaxation.solve_lp()
    kinds = relaxation.instance.kinds
    by_milli = {(kinds[k].count, kinds[k].milli): n for k, n in relaxation.placed.items()}
    assert by_milli == pytest.approx({(1, 470): 2.0, (1, 1000): 1.0})
    assert sum(n * kinds[k].value for k, n in relaxation.placed.items()) == pytest.approx(relaxation.lp_value)
