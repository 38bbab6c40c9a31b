"""Required and preferred node affinity (component-helpers' `nodeaffinity`) against kube-scheduler's
NodeAffinity tables (`tests/scheduler/kubesem/node_cases.py`); the preferred terms' normalised score
is in `tests/scheduler/kubesem/test_scores.py`."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.semantics.labels import SelectorError
from runtimekit.kube.semantics.nodeaffinity import (
    node_selector_pairs,
    preferred_terms,
    required_matches,
    required_terms,
)
from scheduler.kubesem.builders import expr, exprs, pod
from scheduler.kubesem.node_cases import NODE_AFFINITY_CASES, preferred


@pytest.mark.parametrize(("manifest", "labels", "name", "fit"), NODE_AFFINITY_CASES)
def test_required_node_affinity(manifest: Any, labels: dict[str, str], name: str, fit: bool) -> None:
    spec = manifest["spec"]
    assert required_matches(node_selector_pairs(spec), required_terms(spec), labels, name) is fit


def test_an_invalid_preferred_term_is_an_error() -> None:
    manifest = pod(node_affinity=preferred((2, exprs(expr("invalid key", "In", "bar")))))
    with pytest.raises(SelectorError, match="invalid key"):
        preferred_terms(manifest["spec"])


def test_weight_zero_and_empty_preferred_terms_are_left_out() -> None:
    manifest = pod(node_affinity=preferred((0, exprs(expr("a", "Exists"))), (3, {})))
    assert preferred_terms(manifest["spec"]) == ()


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"nodeSelector": ["zone-a"]}, "nodeSelector: must be an object", id="nodeSelector a list"),
        pytest.param(
            {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": ["bad"]}}}},
            r"nodeSelectorTerms\[0\]: must be an object",
            id="a term not an object",
        ),
        pytest.param(
            {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": ["x"]}]}}}},
            "matchExpressions: must be a list of objects",
            id="an expression not an object",
        ),
        pytest.param(
            {"affinity": {"nodeAffinity": {REQUIRED: "zone-a"}}},
            f"{REQUIRED}: must be an object",
            id="required a string",
        ),
    ],
)
def test_a_malformed_shape_is_an_error_not_a_mismatch(spec: dict[str, Any], message: str) -> None:
    """The API server rejects such pods; where one gets through, the scheduler reports it invalid."""
    with pytest.raises(SelectorError, match=message):
        (node_selector_pairs(spec), required_terms(spec))


def test_a_requirement_that_does_not_parse_matches_no_node() -> None:
    """kube-scheduler's lazy-error node selector: the term is kept and matches nothing."""
    spec = {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [exprs(expr("zone", "Near", "a"))]}}}}
    assert not required_matches((), required_terms(spec), {"zone": "a"}, "n1")
