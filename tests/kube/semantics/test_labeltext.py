"""Label selectors' text form: apimachinery's `labels.Parse` grammar and matching rules, as tables and
properties, and `Selector.String`'s output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.kube.semantics.labels import (
    DOES_NOT_EXIST,
    EQUALS,
    EXISTS,
    IN,
    NOT_EQUALS,
    NOT_IN,
    SelectorError,
    label_selector,
)
from runtimekit.kube.semantics.labeltext import parse_label_selector, to_string

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
    assert [(r.key, r.operator) for r in parsed.requirements] == [
        ("a", EQUALS),
        ("b", NOT_EQUALS),
        ("c", IN),
        ("d", NOT_IN),
        ("e", EXISTS),
        ("f", DOES_NOT_EXIST),
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


@pytest.mark.parametrize(
    ("text", "written"),
    [
        pytest.param("", "", id="everything"),
        pytest.param("b=2,a==1,c!=3", "a==1,b=2,c!=3", id="sorted by key, each operator as written"),
        pytest.param("x in (z,y),!w,v,u notin (a)", "u notin (a),v,!w,x in (y,z)", id="sets sorted"),
        pytest.param("n>5,m<7", "m<7,n>5", id="Gt and Lt"),
    ],
)
def test_a_parsed_selector_prints_back(text: str, written: str) -> None:
    assert to_string(parse_label_selector(text)) == written


@pytest.mark.parametrize(
    ("selector", "written"),
    [
        pytest.param(None, "", id="nil: nothing"),
        pytest.param({}, "", id="empty: everything"),
        pytest.param(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "app=web,tier in (a,b)",
            id="a Scale's status.selector",
        ),
        pytest.param(
            {"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]},
            "!a,z=1",
            id="matchLabels and expressions sorted together",
        ),
        pytest.param(
            {
                "matchExpressions": [
                    {"key": "k", "operator": "NotIn", "values": ["v"]},
                    {"key": "e", "operator": "Exists"},
                ]
            },
            "e,k notin (v)",
            id="NotIn and Exists",
        ),
    ],
)
def test_an_object_selector_prints_as_label_selector_as_selector_does(selector: object, written: str) -> None:
    assert to_string(label_selector(selector)) == written  # type: ignore[arg-type]
