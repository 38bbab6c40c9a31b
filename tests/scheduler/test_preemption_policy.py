"""A pod whose `preemptionPolicy` is Never evicts nothing, in preempt or reclaim (kube-scheduler's and
Volcano's rule); the other pods of its job still may. Rows of Volcano's TestPreempt and TestReclaim."""

from __future__ import annotations

import pytest

from scheduler.live_tables import Row
from scheduler.volcano_cases import run
from scheduler.volcano_more_rows import preempt_rows, reclaim_rows


def row(name: str) -> Row:
    return next(r for r in [*preempt_rows(), *reclaim_rows()] if r.name == name)


@pytest.mark.parametrize(
    "name",
    [
        "can not preempt resources when task preemption policy is never",
        "can not reclaim resources when task preemption policy is never",
        "Reclaim succeeds for second task when first task has PreemptionPolicy=Never",
    ],
)
def test_a_pod_that_never_preempts_evicts_nothing(name: str) -> None:
    case = row(name)
    api, _ = run(case.case)
    assert sorted(api.evicted) == sorted(case.evicted or [])


def test_the_same_pod_preempting_lower_priority_evicts() -> None:
    """The Never row with the policy left out: the victim goes (so the row tests the policy)."""
    case = row("can not preempt resources when task preemption policy is never").case
    for pod in case.pods:
        pod["spec"].pop("preemptionPolicy", None)
    api, _ = run(case)
    assert api.evicted == ["c1/preemptee1"]
