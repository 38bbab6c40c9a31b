"""kube-scheduler's TaintToleration score and NodeUnschedulable filter against its tables
(`node_cases.py`); the TaintToleration filter's table is `tests/kube/semantics/test_tolerations.py`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from runtimekit.scheduler.kubesem.scores import default_normalize
from runtimekit.scheduler.kubesem.taints import intolerable_prefer_no_schedule, tolerates_unschedulable
from scheduler.kubesem.builders import Json, pod, tolerations_of
from scheduler.kubesem.node_cases import TAINT_SCORE_CASES, tol


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


def _tolerations(items: list[Json]):  # type: ignore[no-untyped-def]
    return tolerations_of(pod(tolerations=items))


@pytest.mark.parametrize(("tolerations", "nodes", "want"), TAINT_SCORE_CASES)
def test_prefer_no_schedule_scores(
    tolerations: list[Json], nodes: list[list[tuple[str, str, str]]], want: list[int]
) -> None:
    raw = np.array(
        [intolerable_prefer_no_schedule([Taint(*t) for t in taints], _tolerations(tolerations)) for taints in nodes],
        np.float64,
    )
    assert default_normalize(raw, reverse=True).tolist() == want


@pytest.mark.parametrize(
    ("tolerations", "tolerates"),
    [
        pytest.param([], False, id="no toleration"),
        pytest.param(
            [tol("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule")], True, id="the taint's key"
        ),
        pytest.param([tol(operator="Exists")], True, id="every taint"),
        pytest.param(
            [tol("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute")], False, id="another effect"
        ),
        pytest.param([tol("node.kubernetes.io/unschedulable", "Equal", "x")], False, id="another value"),
    ],
)
def test_cordoned_nodes(tolerations: list[Json], tolerates: bool) -> None:
    assert tolerates_unschedulable(_tolerations(tolerations)) is tolerates
