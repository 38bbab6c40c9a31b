"""Kubernetes' naming rules (apimachinery's `util/validation` and `IsExtendedResourceName`); named
apart from `tests/protocol/test_names.py`, whose module builds on this one."""

from __future__ import annotations

import pytest

from runtimekit.kube.semantics.names import (
    LABEL_VALUE_MSG,
    check_dns_label,
    check_dns_subdomain,
    check_label_value,
    check_qualified_name,
    is_extended_resource_name,
)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("main", True),
        ("a", True),
        ("web-1", True),
        ("0abc", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("Main", False),
        ("a.b", False),
        ("a_b", False),
        ("-a", False),
        ("a-", False),
        ("a\n", False),
    ],
)
def test_dns_labels(value: str, ok: bool) -> None:
    assert (check_dns_label(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("example.com", True),
        ("a", True),
        ("a-b.c-d", True),
        ("", False),
        ("A.com", False),
        ("-a.com", False),
        ("a..b", False),
        ("a" * 254, False),
        ("a.com\n", False),  # Go's `$` does not match before a trailing newline
    ],
)
def test_dns_subdomains(value: str, ok: bool) -> None:
    assert (check_dns_subdomain(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("app", True),
        ("example.com/app", True),
        ("app.kubernetes.io/name", True),
        ("a_b.c-d", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("/app", False),
        ("Example.com/app", False),
        ("a/b/c", False),
        ("app/", False),
        ("-app", False),
        ("app\n", False),
    ],
)
def test_qualified_names(value: str, ok: bool) -> None:
    assert (check_qualified_name(value) is None) is ok


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", None),
        ("MyValue", None),
        ("my_value.1-2", None),
        ("x" * 63, None),
        ("x" * 64, "must be no more than 63 characters"),
        ("-a", LABEL_VALUE_MSG),
        ("a b", LABEL_VALUE_MSG),
        ("é", LABEL_VALUE_MSG),
        ("a\n", LABEL_VALUE_MSG),
    ],
)
def test_label_values(value: str, problem: str | None) -> None:
    assert check_label_value(value) == problem


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("example.com/foo", True),
        ("nvidia.com/gpu", True),
        ("cpu", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/foo", False),
        ("requests.example.com/foo", False),
        ("example.com/bad name", False),
    ],
)
def test_extended_resource_names(name: str, extended: bool) -> None:
    assert is_extended_resource_name(name) is extended
