"""The independent checker of offline packings: each broken constraint is named, a good packing's
value is its placed GPU milli."""

from __future__ import annotations

import pytest

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.feasibility import InfeasiblePacking, check

NODES = [TraceNode("a", 8000, 16384, 2, "T4"), TraceNode("b", 4000, 8192, 1, "P100")]
PODS = [
    TracePod("share-600", 2000, 4096, 1, 600),
    TracePod("share-400", 2000, 4096, 1, 400),
    TracePod("whole-1", 2000, 4096, 1, 1000),
    TracePod("cpu-only", 1000, 1024, 0, 0),
    TracePod("p100-only", 1000, 1024, 1, 500, "P100"),
    TracePod("whole-2", 1000, 1024, 2, 1000),
]


def test_a_feasible_packing_is_worth_its_gpu_milli() -> None:
    packing = [(0, 0, (0,)), (1, 0, (0,)), (2, 0, (1,)), (3, 0, ()), (4, 1, (0,))]
    assert check(NODES, PODS, packing) == 600 + 400 + 1000 + 500
    assert check(NODES, PODS, []) == 0


@pytest.mark.parametrize(
    ("packing", "message"),
    [
        pytest.param([(0, 0, (0,)), (0, 0, (1,))], "placed twice", id="twice"),
        pytest.param([(9, 0, (0,))], "not one of the 6 pods", id="no-such-pod"),
        pytest.param([(0, 5, (0,))], "not one of the 2 nodes", id="no-such-node"),
        pytest.param([(0, 1, (1,))], "has no GPU 1", id="no-such-gpu"),
        pytest.param([(0, 0, ())], "asks 1 GPU(s)", id="gpu-missing"),
        pytest.param([(5, 0, (0, 0))], "asks 2 GPU(s)", id="same-gpu-twice"),
        pytest.param([(3, 0, (0,))], "asks 0 GPU(s)", id="cpu-only-given-a-gpu"),
        pytest.param([(0, 0, (0,)), (4, 0, (0,))], "may not use model T4", id="model"),
        pytest.param([(0, 0, (0,)), (0 + 1, 0, (1,)), (2, 0, (0,))], "taken whole", id="whole-on-shared"),
        pytest.param([(2, 0, (0,)), (0, 0, (0,))], "taken whole", id="share-on-whole"),
        pytest.param([(0, 1, (0,)), (4, 1, (0,))], "more than 1000 milli", id="over-1000"),
        pytest.param([(0, 1, (0,)), (3, 1, ()), (5, 0, (0, 1)), (1, 1, (0,))], "more CPU", id="cpu"),
    ],
)
def test_each_broken_constraint_is_named(packing: list[tuple[int, int, tuple[int, ...]]], message: str) -> None:
    with pytest.raises(InfeasiblePacking, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(NODES, PODS, packing)


def test_memory_counts() -> None:
    pods = [TracePod("big", 100, 10_000, 1, 300), TracePod("big2", 100, 10_000, 1, 300)]
    with pytest.raises(InfeasiblePacking, match="more memory"):
        check(NODES, pods, [(0, 0, (0,)), (1, 0, (1,))])
