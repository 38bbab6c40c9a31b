"""Kubernetes quantities: exact amounts in the kit's units, resource.Quantity's syntax check and the
canonical text of a number."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from runtimekit.kube.semantics.quantity import (
    QUANTITY_FORMAT_MSG,
    QUANTITY_SUFFIX_MSG,
    cpu_milli,
    is_whole,
    memory_mib,
    number_quantity,
    parse_quantity,
    quantity_problem,
    quantity_text_problem,
    whole_number,
)


@pytest.mark.parametrize(
    ("text", "milli", "mib"),
    [
        ("500m", 500, None),
        ("2", 2000, None),
        ("1.5", 1500, None),
        ("1Gi", None, 1024),
        ("512Mi", None, 512),
        ("1e3", 1_000_000, None),
        ("1G", None, 954),
    ],
)
def test_quantities(text: str, milli: int | None, mib: int | None) -> None:
    if milli is not None:
        assert cpu_milli(text) == milli
    if mib is not None:
        assert memory_mib(text) == mib


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "", "5Xi", True, None])
def test_bad_quantities(bad: object) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("1", True),
        ("500m", True),
        ("1.5Gi", True),
        ("1e3", True),
        ("+.5", True),
        (2, True),
        (1e30, True),
        ("abc", False),
        ("", False),
        ("1 Gi", False),
        ("--1", False),
        ("1mi", False),
        (True, False),
        ([1], False),
    ],
)
def test_quantity_syntax_is_resource_quantitys(value: object, ok: bool) -> None:
    assert (quantity_problem(value) == "") is ok


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1ki", QUANTITY_SUFFIX_MSG),
        ("1x", QUANTITY_FORMAT_MSG),
        ("Gi", QUANTITY_FORMAT_MSG),
        ("1.5Gi", ""),
        ("  2 ", ""),
    ],
)
def test_the_cached_text_check_words_what_is_wrong(value: str, problem: str) -> None:
    assert quantity_text_problem(value) == quantity_problem(value) == problem


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("0e999999999", Fraction(0)),  # zero whatever the exponent: nothing to compute
        ("-1.5Ki", Fraction(-1536)),
        ("1n", Fraction(1, 10**9)),
        (".5", Fraction(1, 2)),
        (3, Fraction(3)),
    ],
)
def test_parse_quantity_is_exact(text: object, amount: Fraction) -> None:
    assert parse_quantity(text) == amount


@pytest.mark.parametrize("text", ["1e999999999", "1E-999999999", "5e41", "1e-50"])
def test_a_huge_exponent_is_out_of_range_and_the_error_names_the_value(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{text!r} is out of range")):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "whole"),
    [
        ("2k", True),
        ("500m", False),
        ("1.5", False),
        ("100e-2", True),
        ("1.55e1", False),
        ("1e-50", False),  # out of parse_quantity's range, still decided
        ("-1e-50", False),
        ("1e50", True),
        ("0e-99", True),
        (3, True),
        (0.5, False),
    ],
)
def test_is_whole_decides_any_exponent_from_the_digits(value: object, whole: bool) -> None:
    assert is_whole(value) is whole


def test_whole_numbers_refuse_fractions() -> None:
    assert whole_number("2k") == 2000
    with pytest.raises(ValueError, match="whole number"):
        whole_number("500m")


@pytest.mark.parametrize(("number", "text"), [(30, "30"), (1000, "1k"), (0.5, "500m"), (1.5, "1500m"), (0, "0")])
def test_a_number_reads_as_its_canonical_quantity(number: float, text: str) -> None:
    assert number_quantity(number) == text
