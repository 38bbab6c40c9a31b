"""Field selectors: apimachinery's grammar and matching rules, as tables (label selectors' text form is
`tests/kube/semantics/test_labeltext.py`)."""

from __future__ import annotations

import pytest

from runtimekit.cluster.apiserver.selectors import FieldTerm, field_value, parse_field_selector
from runtimekit.kube.semantics.labels import SelectorError

FIELD_CASES = [
    ("", ()),
    ("spec.nodeName=n1", (FieldTerm("spec.nodeName", "n1"),)),
    ("spec.nodeName==n1", (FieldTerm("spec.nodeName", "n1"),)),
    ("status.phase!=Failed", (FieldTerm("status.phase", "Failed", negate=True),)),
    (
        "spec.nodeName=N,status.phase!=Failed,status.phase!=Succeeded",
        (
            FieldTerm("spec.nodeName", "N"),
            FieldTerm("status.phase", "Failed", negate=True),
            FieldTerm("status.phase", "Succeeded", negate=True),
        ),
    ),
    ("involvedObject.namespace=", (FieldTerm("involvedObject.namespace", ""),)),
    (r"metadata.name=a\,b", (FieldTerm("metadata.name", "a,b"),)),
    (r"metadata.name=a\=b", (FieldTerm("metadata.name", "a=b"),)),
]


@pytest.mark.parametrize(("text", "terms"), FIELD_CASES, ids=[c[0] or "<empty>" for c in FIELD_CASES])
def test_field_selector_parses(text: str, terms: tuple[FieldTerm, ...]) -> None:
    assert parse_field_selector(text).terms == terms


@pytest.mark.parametrize("text", ["spec.nodeName", "=x", r"a=b\x", "a=b\\"])
def test_field_selector_rejects(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_field_selector_matching_treats_missing_fields_as_empty() -> None:
    selector = parse_field_selector("spec.nodeName=,status.phase!=Failed")
    assert selector.matches({"status.phase": "Pending"})
    assert not selector.matches({"spec.nodeName": "n1", "status.phase": "Pending"})
    assert not selector.matches({"status.phase": "Failed"})


@pytest.mark.parametrize(
    ("obj", "path", "value"),
    [
        ({"spec": {"nodeName": "n1"}}, "spec.nodeName", "n1"),
        ({"spec": {}}, "spec.nodeName", ""),
        ({"spec": {"hostNetwork": True}}, "spec.hostNetwork", "true"),
        ({"spec": {"unschedulable": False}}, "spec.unschedulable", "false"),
        ({"status": {"succeeded": 2}}, "status.successful", ""),
        ({"spec": "scalar"}, "spec.nodeName", ""),
    ],
)
def test_field_value(obj: dict[str, object], path: str, value: str) -> None:
    assert field_value(obj, path) == value
