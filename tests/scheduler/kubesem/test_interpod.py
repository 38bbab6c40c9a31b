"""The inter-pod affinity filter and score against kube-scheduler's own tables (`interpod_cases.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from runtimekit.scheduler.kubesem import interpod
from runtimekit.scheduler.kubesem.pods import pod_facts
from scheduler.kubesem.builders import Cluster, Node, exists, fails, is_in, node, pod, term
from scheduler.kubesem.interpod_cases import FILTER_CASES, HARD_WEIGHT_CASES, NAMESPACES, SCORE_CASES


@pytest.mark.parametrize(("nodes", "placed", "namespaces", "incoming", "expected"), FILTER_CASES)
def test_required_affinity_and_anti_affinity(
    nodes: list[Node], placed: list[Any], namespaces: Mapping[str, Mapping[str, str]], incoming: Any, expected: dict
) -> None:
    assert fails(Cluster(nodes, placed, namespaces).interpod_reasons(incoming)) == expected


@pytest.mark.parametrize(("nodes", "placed", "incoming", "want", "hard"), SCORE_CASES + HARD_WEIGHT_CASES)
def test_preferred_affinity_scores(
    nodes: list[Node], placed: list[Any], incoming: Any, want: list[int], hard: int
) -> None:
    assert Cluster(nodes, placed, NAMESPACES).interpod_scores(incoming, hard_weight=hard) == want


def test_an_invalid_label_value_in_a_term_makes_the_pod_unplaceable() -> None:
    bad = pod(labels={"service": "securityscan"}, affinity=[term(is_in("service", "{{.bad-value.}}"), "region")])
    problem = pod_facts(bad).problem
    assert problem.startswith("parsing pod: affinity terms:")
    assert '"{{.bad-value.}}"' in problem


# The facts of TestPreFilterStateAddRemovePod / TestGetTPMapMatchingIncomingAffinityAntiAffinity:
# counts after placing a pod in the session equal counts computed with the pod there from the
# start, and taking it away gives back the counts before.
NODES3 = [
    node("nodeA", region="r1", zone="z11"),
    node("nodeB", region="r1", zone="z12"),
    node("nodeC", region="r2", zone="z21"),
]
FOO_BAR_ANTI = [term(is_in("foo", "bar"), "region")]
COMPLEX = [
    term(is_in("foo", "bar", "buzz"), "region"),
    term(
        {"matchExpressions": [{"key": "service", "operator": "NotIn", "values": ["bar", "security", "test"]}]}, "zone"
    ),
]
ADD_REMOVE = [
    pytest.param(
        pod("pending", labels={"foo": "bar"}, anti=FOO_BAR_ANTI),
        [pod("p1", "nodeA", labels={"foo": "bar"}), pod("p2", "nodeC", anti=FOO_BAR_ANTI)],
        pod("added", "nodeB", labels={"foo": "bar"}, anti=FOO_BAR_ANTI),
        id="anti-affinity terms",
    ),
    pytest.param(
        pod("pending", labels={"foo": "bar"}, anti=COMPLEX),
        [pod("p1", "nodeA", labels={"foo": "bar"}), pod("p2", "nodeC", anti=FOO_BAR_ANTI)],
        pod("added", "nodeA", labels={"foo": "bar"}, anti=COMPLEX),
        id="several anti-affinity terms",
    ),
    pytest.param(
        pod("pending", labels={"foo": "bar"}, affinity=COMPLEX),
        [pod("p1", "nodeA", labels={"foo": "bar"}), pod("p2", "nodeC", affinity=COMPLEX, anti=FOO_BAR_ANTI)],
        pod("added", "nodeA", labels={"foo": "bar"}, anti=COMPLEX),
        id="affinity and anti-affinity terms",
    ),
]


def _state(cluster: Cluster, incoming: Any) -> tuple[list[str | None], list[int] | None]:
    facts = pod_facts(incoming)
    rows = cluster.all_rows()
    codes = interpod.filter_codes(cluster.index, cluster.topology, facts, rows)
    raw = interpod.raw_scores(cluster.index, cluster.topology, facts, rows, 1)
    counts = [cluster.index.counts((t,)).tolist() for t in facts.anti_affinity + facts.affinity]
    return [interpod.REASONS.get(int(c)) for c in codes] + [str(counts)], None if raw is None else raw.tolist()


@pytest.mark.parametrize(("pending", "existing", "added"), ADD_REMOVE)
def test_placing_and_removing_a_pod_in_the_session_updates_the_counts(
    pending: Any, existing: list[Any], added: Any
) -> None:
    from_start = Cluster(NODES3, [*existing, added])
    session = Cluster(NODES3, existing)
    before = _state(session, pending)
    session.index.add(added["metadata"]["uid"], pod_facts(added), session.rows[added["spec"]["nodeName"]])
    assert _state(session, pending) == _state(from_start, pending)
    session.index.remove(added["metadata"]["uid"])
    assert _state(session, pending) == before


def test_counts_per_domain_match_the_upstream_topology_maps() -> None:
    """TestGetTPMapMatchingIncomingAffinityAntiAffinity: a pod matching both affinity terms counts
    once per term on its node's hostname; anti-affinity terms count per term."""
    nodes = [node("nodeA", hostname="nodeA")]
    normal_ab = pod("normal", "nodeA", labels={"aaa": "", "bbb": ""})
    incoming = pod(
        "affi-antiaffi",
        affinity=[term(exists("aaa"), "hostname"), term(exists("bbb"), "hostname")],
        anti=[term(exists("aaa"), "hostname")],
    )
    cluster = Cluster(nodes, [normal_ab])
    facts = pod_facts(incoming)
    assert cluster.index.counts(facts.affinity).tolist() == [1]
    assert cluster.index.counts(facts.anti_affinity).tolist() == [1]
    assert interpod.filter_codes(cluster.index, cluster.topology, facts, cluster.all_rows()).tolist() == [
        interpod.ANTI_AFFINITY
    ]


def test_normalize_spreads_scores_between_min_and_max() -> None:
    assert interpod.normalize(np.array([-5, 0, 10], np.int64)).tolist() == [0, 33, 100]
    assert interpod.normalize(np.array([3, 3], np.int64)).tolist() == [0, 0]
