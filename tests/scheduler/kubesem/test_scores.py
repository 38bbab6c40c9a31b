"""kube-scheduler's score arithmetic: image locality (`node_cases.IMAGE_CASES`), preferred node affinity
(`node_cases.NODE_AFFINITY_SCORES`) and normalisation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtimekit.kube.semantics.nodeaffinity import preferred_score, preferred_terms
from runtimekit.scheduler.kubesem.pods import normalized_image, pod_facts
from runtimekit.scheduler.kubesem.scores import default_normalize, image_score
from scheduler.kubesem.builders import pod
from scheduler.kubesem.node_cases import IMAGE_CASES, MB, NODE_AFFINITY_SCORES

NodeImages = tuple[tuple[tuple[str, ...], int], ...]


@pytest.mark.parametrize(("images", "init", "nodes", "want"), IMAGE_CASES)
def test_image_locality(images: list[str], init: list[str], nodes: list[NodeImages], want: list[int]) -> None:
    facts = pod_facts(pod(images=images, init_images=init))
    per_node = [{name: size * MB for names, size in node for name in names} for node in nodes]
    spread: dict[str, int] = {}
    for held in per_node:
        for name in held:
            spread[name] = spread.get(name, 0) + 1
    got = [image_score(facts.images, facts.containers, held, spread, len(nodes)) for held in per_node]
    assert got == want


@pytest.mark.parametrize(("manifest", "nodes", "want"), NODE_AFFINITY_SCORES)
def test_preferred_node_affinity(manifest: Any, nodes: list[tuple[str, dict[str, str]]], want: list[int]) -> None:
    terms = preferred_terms(manifest["spec"])
    raw = np.array([preferred_score(terms, labels, name) for name, labels in nodes], np.float64)
    assert default_normalize(raw).tolist() == want


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        pytest.param("root", "root:latest", id="no tag"),
        pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="registry port, no tag"),
        pytest.param("root:tag", "root:tag", id="tag"),
        pytest.param("root@sha256:abc", "root@sha256:abc", id="digest"),
    ],
)
def test_normalized_image_names(name: str, normalized: str) -> None:
    assert normalized_image(name) == normalized


def test_init_containers_count_towards_the_threshold() -> None:
    facts = pod_facts(pod(images=["a"], init_images=["b"]))
    assert (facts.images, facts.containers) == (("b:latest", "a:latest"), 2)


@pytest.mark.parametrize(
    ("raw", "reverse", "want"),
    [
        pytest.param([2, 11, 4], False, [18, 100, 36], id="scaled to the max"),
        pytest.param([0, 0], False, [0, 0], id="all zero"),
        pytest.param([0, 1, 2], True, [100, 50, 0], id="reversed"),
        pytest.param([0, 0], True, [100, 100], id="reversed, all zero"),
    ],
)
def test_default_normalize(raw: list[int], reverse: bool, want: list[int]) -> None:
    assert default_normalize(np.array(raw, np.float64), reverse).tolist() == want
