"""How many feasible nodes are scored with Volcano's --percentage-nodes-to-find and its two minimums
(Volcano's CalculateNumOfFeasibleNodesToFind, kube-scheduler's numFeasibleNodesToFind), and the
rotating start that gives every node the same chance across tasks."""

from __future__ import annotations

import numpy as np
import pytest

from runtimekit.scheduler.framework.sampling import NodeSampler, NodeSampling


@pytest.mark.parametrize(
    ("sampling", "nodes", "count"),
    [
        pytest.param(NodeSampling(), 50, 50, id="at-most-the-minimum-every-node"),
        pytest.param(NodeSampling(), 100, 100, id="exactly-the-minimum"),
        pytest.param(NodeSampling(), 1000, 420, id="adaptive-1000"),  # 50 - 1000/125 = 42 %
        pytest.param(NodeSampling(), 5000, 500, id="adaptive-5000"),  # 50 - 40 = 10 %
        pytest.param(NodeSampling(), 6000, 300, id="adaptive-floor"),  # 50 - 48 = 2 % -> 5 %
        pytest.param(NodeSampling(), 1500, 570, id="adaptive-1500"),  # 50 - 12 = 38 %
        pytest.param(NodeSampling(percentage=10), 5000, 500, id="fixed"),
        pytest.param(NodeSampling(percentage=1), 5000, 100, id="fixed-below-minimum"),
        pytest.param(NodeSampling(percentage=100), 5000, 5000, id="all"),
        pytest.param(NodeSampling(min_nodes=10, percentage=50), 30, 15, id="small-minimum"),
    ],
)
def test_feasible_nodes_to_find(sampling: NodeSampling, nodes: int, count: int) -> None:
    assert sampling.count(nodes) == count


def test_searches_start_where_the_last_one_stopped() -> None:
    sampler = NodeSampler(NodeSampling(percentage=50, min_nodes=2))  # 4 of 8 nodes
    candidates = np.arange(8, dtype=np.int64)
    feasible = np.array([0, 2, 3, 5, 6, 7], np.int64)
    assert sampler.take(candidates, feasible).tolist() == [0, 2, 3, 5]
    assert sampler.next_start == 6  # nodes 0..5 were examined
    assert sampler.take(candidates, feasible).tolist() == [0, 2, 6, 7]  # 6, 7, then round to 0, 2
    assert sampler.next_start == 3
    few = np.array([1], np.int64)
    assert sampler.take(candidates, few).tolist() == [1]  # fewer than wanted: all of them, start kept
    assert sampler.next_start == 3
