"""The pod index: a snapshot costs nothing when nothing changed, and counts and term lookups kept
current by session placements and evictions equal those worked out from scratch."""

from __future__ import annotations

import copy
import random

import pytest

from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.podbook import PodBook, PodSet
from runtimekit.scheduler.kubesem.pods import PodFacts, pod_facts
from runtimekit.scheduler.kubesem.ports import HostPort
from scheduler.kubesem.builders import exists, is_in, pod, term, weighted

NODES = ["n0", "n1", "n2", "n3"]
ROW = {n: i for i, n in enumerate(NODES)}


def test_frozen_is_reused_until_something_changes() -> None:
    book = PodBook()
    book.add("a", pod_facts(pod("a")), "n0")
    first = book.frozen()
    assert book.frozen() is first
    book.set_namespace("ns", {"team": "x"})
    second = book.frozen()
    assert second is not first
    assert second.namespaces == {"ns": {"team": "x"}}
    book.set_namespace("ns", {"team": "x"})
    assert book.frozen() is second
    book.remove("a")
    assert "a" not in book.frozen().pods


def test_a_later_event_of_a_booked_pod_leaves_the_book_as_it_was() -> None:
    book = PodBook()
    first = pod("a", labels={"app": "x"}, anti=[term(exists("app"), "zone")])
    book.add_pod("a", first, "default", "n0")
    frozen = book.frozen()
    bound = copy.deepcopy(first)
    bound["spec"]["nodeName"] = "n0"  # its binding, as the informer then tells it
    book.add_pod("a", bound, "default", "n0")
    assert book.frozen() is frozen
    relabelled = copy.deepcopy(bound)
    relabelled["metadata"]["labels"]["app"] = "y"
    book.add_pod("a", relabelled, "default", "n0")
    facts = book.frozen().pods["a"][0]
    assert facts.labels == {"app": "y"}
    book.remove("a")  # the book forgets what it parsed of a pod that left it
    book.add_pod("a", relabelled, "default", "n1")
    assert book.frozen().pods["a"][0] is not facts


def _random_pod(rng: random.Random, i: int) -> dict:
    labels = {k: rng.choice(["a", "b"]) for k in ("app", "tier") if rng.random() < 0.7}
    anti = [term(is_in("app", labels["app"]), "zone")] if "app" in labels and rng.random() < 0.5 else []
    pref = [weighted(3, term(exists("tier"), "zone"))] if rng.random() < 0.3 else []
    ports = [("TCP", rng.choice(["", "10.0.0.1"]), rng.choice([80, 443]))] if rng.random() < 0.3 else []
    return pod(
        f"p{i}",
        ports=ports,
        node=rng.choice(NODES),
        ns=rng.choice(["default", "other"]),
        labels=labels,
        anti=anti,
        preferred=pref,
        terminating=rng.random() < 0.1,
    )


QUERIES = [
    (term(is_in("app", "a"), "zone"),),
    (term(exists("tier"), "zone"),),
    (term(is_in("app", "b"), "zone"), term(is_in("tier", "a"), "zone")),
    (term({}, "zone", ns_selector={}),),
]


def _view(index: PodIndex, probes: list[PodFacts]) -> list[object]:
    out: list[object] = []
    for raw_terms in QUERIES:
        terms = tuple(pod_facts(pod(anti=list(raw_terms))).anti_affinity)
        out.append(index.counts(terms).tolist())
        out.append(index.counts(terms, skip_terminating=True).tolist())
    for wanted in ((HostPort("0.0.0.0", "TCP", 80),), (HostPort("10.0.0.2", "TCP", 443),)):
        out.append(sorted(index.port_conflicts(wanted)))
    for probe in probes:
        for kind in ("anti_affinity", "preferred_affinity"):
            found = index.selecting(kind, probe, {})  # type: ignore[arg-type]
            out.append(sorted((repr(key), sorted(rows.items())) for key, rows in found))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_incremental_changes_equal_a_fresh_index(seed: int) -> None:
    rng = random.Random(seed)
    manifests = [_random_pod(rng, i) for i in range(40)]
    base, extra = manifests[:25], manifests[25:]
    book = PodBook()
    for m in base:
        book.add(m["metadata"]["uid"], pod_facts(m), m["spec"]["nodeName"])
    index = PodIndex(book.frozen(), ROW.get, len(NODES))
    probes = [
        pod_facts(pod("probe", labels={"app": "a", "tier": "b"})),
        pod_facts(pod("probe2", ns="other", labels={"app": "b"})),
    ]
    _view(index, probes)  # build every lookup before the changes, so they are updated, not rebuilt
    live = {m["metadata"]["uid"]: m for m in base}
    log: list[tuple[str, PodFacts | None, int]] = []  # the changes so far, for an index built after them
    for step in range(60):
        if rng.random() < 0.5 and extra:
            m = extra.pop()
            live[m["metadata"]["uid"]] = m
            facts = pod_facts(m)
            index.add(m["metadata"]["uid"], facts, ROW[m["spec"]["nodeName"]])
            log.append((m["metadata"]["uid"], facts, ROW[m["spec"]["nodeName"]]))
        elif live:
            key = rng.choice(sorted(live))
            del live[key]
            index.remove(key)
            index.remove(key)  # idempotent
            log.append((key, None, -1))
        late = PodIndex(book.frozen(), ROW.get, len(NODES))  # lookups first built with changes made
        for key, facts, row in log:
            late.add(key, facts, row) if facts is not None else late.remove(key)
        fresh_book = PodBook()
        for key, m in live.items():
            fresh_book.add(key, pod_facts(m), m["spec"]["nodeName"])
        fresh = PodIndex(fresh_book.frozen(), ROW.get, len(NODES))
        assert _view(index, probes) == _view(fresh, probes), f"step {step}"
        assert _view(late, probes) == _view(fresh, probes), f"step {step}"
        assert (index.has_anti_affinity, index.has_terms) == (fresh.has_anti_affinity, fresh.has_terms)


def test_pods_on_nodes_the_session_does_not_know_are_left_out() -> None:
    book = PodBook()
    book.add("gone", pod_facts(pod("gone", labels={"app": "a"})), "vanished")
    book.add("here", pod_facts(pod("here", labels={"app": "a"})), "n1")
    index = PodIndex(book.frozen(), ROW.get, len(NODES))
    (item,) = pod_facts(pod(anti=[term(is_in("app", "a"), "zone")])).anti_affinity
    assert index.counts((item,)).tolist() == [0, 1, 0, 0]
    assert [key for key, _, _ in index.items()] == ["here"]


def test_a_terms_nodes_are_mapped_to_rows_once_a_session_not_once_per_pod() -> None:
    """kube-scheduler's PreScore keeps the existing pods' terms for a cycle; here a session's scoring
    of pod after pod maps the set's nodes carrying a term to rows once (SchedulingPodAffinity: every
    placed pod carries the term, on thousands of nodes), and the session's own placements still count."""
    book = PodBook()
    carrier = [term(is_in("color", "blue"), "zone")]
    for i, node in enumerate(NODES):
        book.add(f"p{i}", pod_facts(pod(f"p{i}", labels={"color": "blue"}, affinity=carrier)), node)
    looked_up: list[str] = []

    def row_of(node: str) -> int | None:
        looked_up.append(node)
        return ROW.get(node)

    index = PodIndex(book.frozen(), row_of, len(NODES))
    incoming = pod_facts(pod("new", labels={"color": "blue"}))
    for _ in range(3):
        ((_, rows),) = index.selecting("affinity", incoming, {})
        assert dict(rows) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert sorted(looked_up) == NODES
    index.add("placed", pod_facts(pod("placed", labels={"color": "blue"}, affinity=carrier)), 2)
    index.remove("p0")
    before = len(looked_up)
    ((_, rows),) = index.selecting("affinity", incoming, {})
    assert dict(rows) == {1: 1, 2: 2, 3: 1}
    assert len(looked_up) == before


def _seen(frozen: PodSet) -> tuple[object, ...]:
    groups = tuple({name: sorted(keys) for name, keys in found.items()} for found in (frozen.by_label, frozen.carrying))
    terms = {
        kind: (
            sorted((repr(key), sorted(nodes.items())) for key, nodes in found.nodes.items()),
            {hint: sorted(map(repr, keys)) for hint, keys in found.by_hint.items()},
        )
        for kind, found in frozen.terms.items()
        if found.nodes or found.by_hint
    }
    return (*groups, terms)


def _indexes(book: PodBook) -> tuple[object, ...]:
    return _seen(book.frozen())


@pytest.mark.parametrize("seed", range(3))
def test_the_book_indexes_are_copied_on_write(seed: int) -> None:
    """A frozen set never changes after the book does, and its indexes equal a fresh book's."""
    rng = random.Random(seed)
    book = PodBook()
    live: dict[str, dict] = {}
    for step in range(80):
        before = book.frozen()
        seen = _seen(before)
        if rng.random() < 0.6 or not live:
            m = _random_pod(rng, step)
            key = rng.choice([m["metadata"]["uid"], *sorted(live)])  # sometimes a pod moved or relabelled
            live[key] = m
            book.add(key, pod_facts(m), m["spec"]["nodeName"])
        else:
            key = rng.choice(sorted(live))
            del live[key]
            book.remove(key)
        assert _seen(before) == seen, f"step {step}: a frozen set changed"
        fresh = PodBook()
        for k, m in live.items():
            fresh.add(k, pod_facts(m), m["spec"]["nodeName"])
        assert _indexes(book) == _indexes(fresh), f"step {step}"
