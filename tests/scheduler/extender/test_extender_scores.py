"""The framework's node scores as kube-scheduler's 0..10: the standalone scheduler's choice alone at 10."""

from __future__ import annotations

import numpy as np
import pytest

from runtimekit.scheduler.extender.scores import extender_scores


@pytest.mark.parametrize(
    ("scores", "best", "expected"),
    [
        pytest.param([1.0, 5.0, 3.0], 1, [0, 10, 4], id="spread"),
        pytest.param([2.0, 2.0, 2.0], 2, [9, 9, 10], id="all-equal: the rank's choice alone at 10"),
        pytest.param([10.0, 10.0, 0.0], 1, [9, 10, 0], id="a tie at the top"),
        pytest.param([0.0, -np.inf, 100.0], 2, [0, 0, 10], id="not finite counts as lowest"),
        pytest.param([7.0], 0, [10], id="one node"),
        pytest.param([300.0, -50.0, 125.0], 0, [10, 0, 4], id="any range"),
        pytest.param([5.0, 1.0], 1, [9, 10], id="a plugin's choice need not be the top score"),
    ],
)
def test_scores(scores: list[float], best: int, expected: list[int]) -> None:
    out = extender_scores(np.array(scores), best)
    assert out.tolist() == expected
    assert int(np.count_nonzero(out == 10)) == 1


def test_no_nodes() -> None:
    assert extender_scores(np.zeros(0), 0).tolist() == []
