"""The `nodeorder` plugin against kube-scheduler's own score tables (the facts of its scoring tests,
`tests/scheduler/kubesem/*_cases.py`), run through a real session one score at a time (weight 1,
the others 0), plus Volcano's weights and arguments."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.plugins import nodeorder
from scheduler.kubesem import interpod_cases, node_cases, spread_cases
from scheduler.kubesem.builders import Node, labelled, node, pod
from scheduler.plugins.kube_harness import cache_of, score_only, scores, session_of

Json = dict[str, Any]


@pytest.mark.parametrize(
    ("nodes", "placed", "incoming", "want", "hard"), interpod_cases.SCORE_CASES + interpod_cases.HARD_WEIGHT_CASES
)
def test_pod_affinity_scores(nodes: list[Node], placed: list[Json], incoming: Json, want: list[int], hard: int) -> None:
    args = score_only("podaffinity", **{"podaffinity.hardPodAffinityWeight": hard})
    ssn = session_of(cache_of(nodes, placed, interpod_cases.NAMESPACES), nodeorder=args)
    assert scores(ssn, incoming, [n.name for n in nodes]) == want


@pytest.mark.parametrize(("nodes", "failed", "placed", "incoming", "want"), spread_cases.SCORE_CASES)
def test_topology_spread_scores(
    nodes: list[Node], failed: list[Node], placed: list[Json], incoming: Json, want: list[int]
) -> None:
    ssn = session_of(cache_of([*nodes, *failed], placed), nodeorder=score_only("podtopologyspread"))
    assert scores(ssn, incoming, [n.name for n in nodes]) == want


@pytest.mark.parametrize(("manifest", "nodes", "want"), node_cases.NODE_AFFINITY_SCORES)
def test_node_affinity_scores(manifest: Json, nodes: list[tuple[str, dict[str, str]]], want: list[int]) -> None:
    ssn = session_of(cache_of([labelled(n, labels) for n, labels in nodes]), nodeorder=score_only("nodeaffinity"))
    assert scores(ssn, manifest, [n for n, _ in nodes]) == want


@pytest.mark.parametrize(("tolerations", "taints", "want"), node_cases.TAINT_SCORE_CASES)
def test_taint_scores(tolerations: list[Json], taints: list[list[tuple[str, str, str]]], want: list[int]) -> None:
    nodes = [node(f"n{i}", taints=t) for i, t in enumerate(taints)]
    ssn = session_of(cache_of(nodes), nodeorder=score_only("tainttoleration"))
    assert scores(ssn, pod(tolerations=tolerations), [n.name for n in nodes]) == want


@pytest.mark.parametrize(("images", "init", "nodes", "want"), node_cases.IMAGE_CASES)
def test_image_locality_scores(images: list[str], init: list[str], nodes: list[Any], want: list[int]) -> None:
    made = [Node(f"n{i}", {}, (), tuple(held)) for i, held in enumerate(nodes)]
    ssn = session_of(cache_of(made), nodeorder=score_only("imagelocality"))
    assert scores(ssn, pod(images=images, init_images=init), [n.name for n in made]) == want


def test_weights_multiply_each_score() -> None:
    nodes = [node("n1", region="China"), node("n2", region="India")]
    placed = [pod("a", "n1", labels={"security": "S1"})]
    incoming = interpod_cases.pod(labels={"security": "S1"}, preferred=interpod_cases.STAY_S1_REGION)
    ssn = session_of(cache_of(nodes, placed), nodeorder={**score_only("podaffinity"), "podaffinity.weight": 3})
    assert scores(ssn, incoming, ["n1", "n2"]) == [300, 0]


def test_volcano_defaults() -> None:
    args = nodeorder.build({}, BuildContext()).args
    weights = {n: getattr(args, n) for n in nodeorder.WEIGHTS}
    assert weights == {
        "leastrequested": 1,
        "mostrequested": 0,
        "balancedresource": 1,
        "nodeaffinity": 2,
        "podaffinity": 2,
        "tainttoleration": 3,
        "imagelocality": 1,
        "podtopologyspread": 2,
    }
    assert args.hard_pod_affinity_weight == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param({"selectorspread.weight": 1}, "selectorspread.weight: only 0 is supported", id="selectorspread"),
        pytest.param({"volumebinding.weight": 2}, "volumebinding.weight: only 0 is supported", id="volumebinding"),
        pytest.param({"podaffinity.weight": -1}, "podaffinity.weight must not be negative", id="negative"),
        pytest.param({"podaffinity.hardPodAffinityWeight": 101}, "0-100", id="hard weight range"),
        pytest.param({"podaffinity.bogus": 1}, "unknown argument 'podaffinity.bogus'", id="unknown"),
    ],
)
def test_refused_arguments_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        nodeorder.build(arguments, BuildContext())


def test_zero_weights_of_missing_scores_are_accepted() -> None:
    assert (
        nodeorder.build({"selectorspread.weight": 0, "volumebinding.weight": 0}, BuildContext()).args.podaffinity == 2
    )
