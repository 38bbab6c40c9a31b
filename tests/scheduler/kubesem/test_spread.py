"""The topology spread filter and score against kube-scheduler's own tables (`spread_cases.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.semantics.labels import SelectorError
from runtimekit.scheduler.kubesem.pods import pod_facts
from runtimekit.scheduler.kubesem.spread import spread_constraints
from scheduler.kubesem.builders import Cluster, Node, constraint, exists, fails, pod
from scheduler.kubesem.spread_cases import FILTER_CASES, SCORE_CASES


@pytest.mark.parametrize(("nodes", "placed", "incoming", "expected"), FILTER_CASES)
def test_hard_constraints_filter(nodes: list[Node], placed: list[Any], incoming: Any, expected: dict) -> None:
    assert fails(Cluster(nodes, placed).spread_reasons(incoming)) == expected


@pytest.mark.parametrize(("nodes", "failed", "placed", "incoming", "want"), SCORE_CASES)
def test_soft_constraints_score(
    nodes: list[Node], failed: list[Node], placed: list[Any], incoming: Any, want: list[int]
) -> None:
    cluster = Cluster([*nodes, *failed], placed)
    assert cluster.spread_scores(incoming, [n.name for n in nodes]) == want


def test_defaults_and_match_label_keys() -> None:
    spec = pod(
        labels={"app": "a", "rev": "1"},
        spread=[constraint(1, "zone", exists("app"), match_label_keys=["rev", "missing"])],
    )["spec"]
    (c,) = spread_constraints(spec, {"app": "a", "rev": "1"})
    assert (c.min_domains, c.honor_affinity, c.honor_taints, c.hard) == (1, True, False, True)
    assert c.selector.matches({"app": "x", "rev": "1"})
    assert not c.selector.matches({"app": "x", "rev": "2"})


def test_match_label_keys_leave_a_missing_selector_selecting_nothing() -> None:
    spec = pod(spread=[constraint(1, "zone", None, match_label_keys=["app"])])["spec"]
    (c,) = spread_constraints(spec, {"app": "a"})
    assert c.selector.nothing


@pytest.mark.parametrize(
    ("item", "field"),
    [
        pytest.param(
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}, "maxSkew", id="zero skew"
        ),
        pytest.param(
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}, "whenUnsatisfiable", id="bad action"
        ),
        pytest.param(
            {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}, "topologyKey", id="no key"
        ),
        pytest.param(
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0},
            "minDomains",
            id="minDomains 0",
        ),
        pytest.param(
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Maybe"},
            "nodeTaintsPolicy",
            id="bad policy",
        ),
    ],
)
def test_invalid_constraints_are_named(item: dict, field: str) -> None:
    with pytest.raises(SelectorError, match=field):
        spread_constraints({"topologySpreadConstraints": [item]}, {})
    assert field in pod_facts({"metadata": {"name": "p"}, "spec": {"topologySpreadConstraints": [item]}}).problem
