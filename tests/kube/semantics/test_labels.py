"""Label selectors against the facts of apimachinery's `labels/selector_test.go` and
`metav1.LabelSelectorAsSelector`: construction rules and matching."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.semantics.labels import (
    GT,
    LT,
    NODE_OPS,
    NOTHING,
    SelectorError,
    label_keys_requirements,
    label_selector,
    label_selector_or_nothing,
    parse_int64,
    requirement,
    selector_problems,
)


@pytest.mark.parametrize(
    ("key", "op", "values", "ok"),
    [
        pytest.param("x1", "In", ["foo"], True, id="In with a value"),
        pytest.param("x2", "NotIn", [], False, id="NotIn without values"),
        pytest.param("x3", "In", [], False, id="In without values"),
        pytest.param("x4", "Exists", [], True, id="Exists"),
        pytest.param("x5", "Exists", ["foo"], False, id="Exists with a value"),
        pytest.param("x6", "DoesNotExist", ["foo"], False, id="DoesNotExist with a value"),
        pytest.param("x7", "Gt", ["1"], True, id="Gt with an integer"),
        pytest.param("x8", "Gt", ["-1"], False, id="Gt with a negative integer is no label value"),
        pytest.param("x9", "Gt", ["a"], False, id="Gt with a word"),
        pytest.param("x10", "Lt", ["1", "2"], False, id="Lt with two values"),
        pytest.param("x11", "Lt", [], False, id="Lt without a value"),
        pytest.param("x" * 64, "Exists", [], False, id="a key of 64 characters"),
        pytest.param("example.com/" + "x" * 63, "Exists", [], True, id="a prefixed key of 63"),
        pytest.param("Example.com/x", "Exists", [], False, id="an upper-case prefix"),
        pytest.param("x=y", "Exists", [], False, id="a key with '='"),
        pytest.param("x", "In", ["a" * 64], False, id="a value of 64 characters"),
        pytest.param("x", "In", [""], True, id="an empty value"),
        pytest.param("x", "In", ["-a"], False, id="a value starting with '-'"),
        pytest.param("x", "Near", ["a"], False, id="an unknown operator"),
    ],
)
def test_requirement_construction(key: str, op: str, values: list[str], ok: bool) -> None:
    if ok:
        requirement(key, op, values, "req", NODE_OPS)
    else:
        with pytest.raises(SelectorError):
            requirement(key, op, values, "req", NODE_OPS)


LABELS = {"x": "foo", "y": "baz", "n": "5"}


@pytest.mark.parametrize(
    ("key", "op", "values", "matches"),
    [
        pytest.param("x", "In", ["foo", "bar"], True, id="In"),
        pytest.param("x", "In", ["bar"], False, id="In, another value"),
        pytest.param("z", "In", ["foo"], False, id="In, no key"),
        pytest.param("x", "NotIn", ["bar"], True, id="NotIn"),
        pytest.param("x", "NotIn", ["foo"], False, id="NotIn, the value"),
        pytest.param("z", "NotIn", ["foo"], True, id="NotIn, no key"),
        pytest.param("x", "Exists", [], True, id="Exists"),
        pytest.param("z", "Exists", [], False, id="Exists, no key"),
        pytest.param("z", "DoesNotExist", [], True, id="DoesNotExist"),
        pytest.param("n", GT, ["4"], True, id="Gt"),
        pytest.param("n", GT, ["5"], False, id="Gt, equal"),
        pytest.param("n", LT, ["6"], True, id="Lt"),
        pytest.param("x", GT, ["1"], False, id="Gt on a word"),
        pytest.param("z", LT, ["1"], False, id="Lt, no key"),
    ],
)
def test_requirement_matching(key: str, op: str, values: list[str], matches: bool) -> None:
    assert requirement(key, op, values, "req", NODE_OPS).matches(LABELS) is matches


def test_a_missing_selector_selects_nothing_and_an_empty_one_everything() -> None:
    assert not label_selector(None).matches({})
    assert label_selector({}).matches({"any": "thing"})
    assert label_selector({"matchLabels": {}, "matchExpressions": []}).everything


def test_match_labels_and_expressions_are_anded() -> None:
    selector = label_selector(
        {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    )
    assert selector.matches({"app": "a", "tier": "x"})
    assert not selector.matches({"app": "a"})
    assert selector.hint() == ("app", "a")


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            "operator",
            id="Gt in a pod selector",
        ),
        pytest.param({"matchLabels": {"a": "b c"}}, "matchLabels", id="a bad matchLabels value"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "In"}]}, "values", id="In without values"),
        pytest.param("app=a", "labelSelector", id="not an object"),
    ],
)
def test_invalid_selectors_name_the_field(obj: Any, field: str) -> None:
    with pytest.raises(SelectorError, match=field):
        label_selector(obj)


def test_label_keys_take_the_pods_values_and_skip_missing_keys() -> None:
    (req,) = label_keys_requirements(["rev", "missing"], {"rev": "7"}, "NotIn", "mismatchLabelKeys")
    assert (req.key, req.operator, req.values) == ("rev", "NotIn", frozenset({"7"}))


@pytest.mark.parametrize(
    ("text", "value"),
    [("12", 12), ("+3", 3), ("-3", -3), (" 1", None), ("1_0", None), ("0x1", None), ("", None), (str(2**63), None)],
)
def test_parse_int64_is_go_strconv(text: str, value: int | None) -> None:
    assert parse_int64(text) == value


def test_match_labels_are_equality_requirements_that_match_as_in() -> None:
    selector = label_selector({"matchLabels": {"b": "2", "a": "1"}})
    assert [(r.key, r.operator) for r in selector.requirements] == [("a", "="), ("b", "=")]
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert not selector.matches({"a": "1"})
    assert selector.hint() == ("a", "1")


def test_a_selector_that_does_not_parse_selects_nothing_where_asked() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
    assert label_selector_or_nothing(bad) is NOTHING
    assert label_selector_or_nothing(None) is NOTHING
    assert label_selector_or_nothing({}).everything


@pytest.mark.parametrize(
    ("selector", "problems"),
    [
        pytest.param(None, [], id="nil is fine"),
        pytest.param({"matchLabels": {"app": "web"}}, [], id="valid"),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            [("s.matchExpressions[0].values", "Required")],
            id="In without values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            [("s.matchExpressions[0].values", "Forbidden")],
            id="Exists with values",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            [("s.matchExpressions[0].operator", "Invalid")],
            id="Gt is no label selector operator",
        ),
        pytest.param(
            {"matchLabels": {"bad key": "bad value!"}},
            [("s.matchLabels", "Invalid"), ("s.matchLabels", "Invalid")],
            id="a bad key and a bad value",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "-no"]}]},
            [("s.matchExpressions[0].values[1]", "Invalid")],
            id="a bad value in a set",
        ),
        pytest.param("app=web", [("s", "Invalid")], id="not an object"),
    ],
)
def test_selector_problems_are_field_errors(selector: object, problems: list[tuple[str, str]]) -> None:
    assert [(p.path, p.kind) for p in selector_problems(selector, "s")] == problems
