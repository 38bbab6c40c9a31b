"""Label and field selectors: apimachinery's grammar and matching rules, as tables and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.cluster.apiserver.selectors import (
    FieldTerm,
    Op,
    SelectorError,
    field_value,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "version": "3", "example.com/team": "gpu"}

LABEL_CASES = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("app!=web", False),
    ("missing!=x", True),
    ("app in (web,db)", True),
    ("app in (db)", False),
    ("app notin (db,cache)", True),
    ("app notin (web)", False),
    ("missing notin (x)", True),
    ("missing in (x)", False),
    ("tier", True),
    ("missing", False),
    ("!missing", True),
    ("!tier", False),
    ("version>2", True),
    ("version<3", False),
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
    ("  app = web ,  tier  in ( front , back ) ", True),
    ("example.com/team=gpu", True),
    ("app=", False),
    ("missing=", False),
]


@pytest.mark.parametrize(("selector", "matches"), LABEL_CASES, ids=[c[0] or "<empty>" for c in LABEL_CASES])
def test_label_selector_matches(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


def test_empty_value_equality_matches_empty_label() -> None:
    assert parse_label_selector("role=").matches({"role": ""})
    assert parse_label_selector("role in (,x)").matches({"role": ""})


BAD_LABEL_SELECTORS = [
    "app in web",
    "app in ()",
    "app=web,",
    "=web",
    "app=(web)",
    "Bad Key=x",
    "app=bad value!",
    "version>abc",
    "app in (a b)",
    "a,,b",
]


@pytest.mark.parametrize("selector", BAD_LABEL_SELECTORS)
def test_label_selector_rejects(selector: str) -> None:
    with pytest.raises(SelectorError, match="unable to parse requirement"):
        parse_label_selector(selector)


def test_label_selector_parses_to_requirements() -> None:
    parsed = parse_label_selector("a=1,b!=2,c in (x,y),d notin (z),e,!f")
    assert [(r.key, r.op) for r in parsed.requirements] == [
        ("a", Op.EQUALS),
        ("b", Op.NOT_EQUALS),
        ("c", Op.IN),
        ("d", Op.NOT_IN),
        ("e", Op.EXISTS),
        ("f", Op.DOES_NOT_EXIST),
    ]
    assert parsed.requirements[2].values == frozenset({"x", "y"})


keys = st.sampled_from(["a", "b", "example.com/c"])
values = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,6}[a-z0-9])?", fullmatch=True)
label_sets = st.dictionaries(keys, values, max_size=3)


@settings(deadline=None)
@given(label_sets, keys, values)
def test_in_with_one_value_is_equality(labels: dict[str, str], key: str, value: str) -> None:
    assert parse_label_selector(f"{key} in ({value})").matches(labels) == parse_label_selector(
        f"{key}={value}"
    ).matches(labels)


@settings(deadline=None)
@given(label_sets, keys, values)
def test_not_equals_is_the_negation_of_equals(labels: dict[str, str], key: str, value: str) -> None:
    assert parse_label_selector(f"{key}!={value}").matches(labels) != parse_label_selector(f"{key}={value}").matches(
        labels
    )


@settings(deadline=None)
@given(label_sets, keys)
def test_exists_and_does_not_exist_partition(labels: dict[str, str], key: str) -> None:
    assert parse_label_selector(key).matches(labels) != parse_label_selector(f"!{key}").matches(labels)


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
