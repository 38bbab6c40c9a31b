"""Parsing a pod's inter-pod facts: namespaces of terms, matchLabelKeys, problems."""

from __future__ import annotations

import copy

from runtimekit.scheduler.kubesem.pods import PodFactsMemo, pod_facts
from scheduler.kubesem.builders import constraint, exists, is_in, pod, term, weighted


def test_a_term_without_namespaces_means_the_pods_own_namespace() -> None:
    facts = pod_facts(pod(ns="team-a", anti=[term(exists("app"), "zone")]))
    (item,) = facts.anti_affinity
    assert item.matches("team-a", {"app": "x"}, None)
    assert not item.matches("team-b", {"app": "x"}, None)


def test_namespaces_and_a_namespace_selector_are_ored() -> None:
    facts = pod_facts(pod(affinity=[term(exists("app"), "zone", namespaces=["a"], ns_selector=is_in("team", "t1"))]))
    (item,) = facts.affinity
    assert item.matches("a", {"app": "x"}, None)
    assert item.matches("b", {"app": "x"}, {"team": "t1"})
    assert not item.matches("b", {"app": "x"}, {"team": "t2"})
    assert not item.matches("b", {"app": "x"}, None)


def test_match_and_mismatch_label_keys_join_the_selector() -> None:
    facts = pod_facts(
        pod(
            labels={"app": "a", "rev": "2", "tenant": "t"},
            anti=[term(exists("app"), "zone", match_label_keys=["rev"], mismatch_label_keys=["tenant"])],
        )
    )
    (item,) = facts.anti_affinity
    assert item.selector.matches({"app": "x", "rev": "2", "tenant": "u"})
    assert not item.selector.matches({"app": "x", "rev": "3", "tenant": "u"})
    assert not item.selector.matches({"app": "x", "rev": "2", "tenant": "t"})


def test_preferred_terms_keep_their_weights() -> None:
    facts = pod_facts(pod(preferred=[weighted(7, term(exists("a"), "zone"))]))
    assert [w.weight for w in facts.preferred_affinity] == [7]


def test_a_bad_part_is_left_out_and_named_while_the_rest_parses() -> None:
    facts = pod_facts(
        pod(
            anti=[term(is_in("app", "a b"), "zone")],
            spread=[constraint(1, "zone", exists("app"))],
            ports=[("TCP", "", 80)],
        )
    )
    assert facts.anti_affinity == ()
    assert facts.problem.startswith("parsing pod: anti-affinity terms:")
    assert len(facts.spread) == 1
    assert [p.port for p in facts.ports] == [80]


def test_a_plain_pod_is_simple_and_has_no_problem() -> None:
    facts = pod_facts(pod(labels={"a": "b"}))
    assert facts.simple
    assert not facts.problem
    assert pod_facts(pod(terminating=True)).terminating


def test_a_later_event_of_a_pod_reuses_its_facts_until_something_they_read_changes() -> None:
    memo = PodFactsMemo()
    facts_for = memo.of
    first = pod("reuse", labels={"app": "a"}, anti=[term(exists("app"), "zone")])
    parsed = facts_for("uid-reuse", first, "default")
    bound = copy.deepcopy(first)
    bound["spec"]["nodeName"] = "n1"  # the binding: no fact reads the node name
    assert facts_for("uid-reuse", bound, "default") is parsed
    relabelled = copy.deepcopy(bound)
    relabelled["metadata"]["labels"]["app"] = "b"
    again = facts_for("uid-reuse", relabelled, "default")
    assert again is not parsed
    assert again.labels == {"app": "b"}
    deleting = copy.deepcopy(relabelled)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    assert facts_for("uid-reuse", deleting, "default").terminating
