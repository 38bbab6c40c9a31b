"""Configuration YAML with its nesting bounded: 100 levels of lists and mappings load, deeper ones
(aliases counted where they are used) and an alias inside its own anchor's node are YAML errors
naming the line, never a RecursionError; text that is not UTF-8 is one line naming the byte."""

from __future__ import annotations

import time

import pytest
import yaml

from runtimekit.base.textfiles import MAX_DEPTH, TextError, decode_text, load_yaml, load_yaml_all, yaml_problem


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def chain(first: int, second: int) -> str:
    """An anchored node `first` levels tall used inside another `second` levels deep."""
    return f"a: &a {nested(first)}\nb: {nested(second, '*a')}\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(nested(MAX_DEPTH), None, id="100 levels"),
        pytest.param("x: " + nested(MAX_DEPTH - 1), None, id="100 levels under a mapping"),
        pytest.param(nested(MAX_DEPTH + 1), "line 1: lists and mappings nested deeper than 100 levels", id="101"),
        pytest.param("a: 1\nb:\n  c: " + nested(50_000), "line 3: lists and mappings nested deeper", id="50,000"),
        pytest.param("x: " + "{a: " * 50_000 + "1" + "}" * 50_000, "nested deeper than 100", id="50,000 mappings"),
        pytest.param(chain(60, 38), None, id="an alias 60 tall, 38 deep: 99 levels"),
        pytest.param(chain(60, 40), "line 2: lists and mappings nested deeper than 100 levels", id="alias too deep"),
        pytest.param("a: &a [1, *a]\n", "line 1: alias *a is inside the node it names (a cycle)", id="cycle"),
        pytest.param("a: &a {b: [*a]}\n", "alias *a is inside the node it names", id="cycle in a mapping"),
    ],
)
def test_nesting_is_bounded(text: str, problem: str | None) -> None:
    if problem is None:
        load_yaml(text)
        return
    with pytest.raises(yaml.YAMLError) as refused:
        load_yaml(text)
    assert problem in yaml_problem(refused.value)


def test_a_50000_deep_line_is_refused_before_the_scanner_spends_seconds_on_it() -> None:
    # PyYAML's scanner looks ahead for a key at each open bracket: 0.6-3 s for this line before its
    # recursion gave out; stopped at the 101st bracket it is some 15 ms
    started = time.perf_counter()
    with pytest.raises(yaml.YAMLError):
        load_yaml("x: " + nested(50_000))
    assert time.perf_counter() - started < 0.5


def test_a_billion_laughs_is_composed_once_and_loads_in_milliseconds() -> None:
    # nine levels of nine aliases: 9**9 scalars if expanded; 10 levels tall, well inside the bound
    text = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    text += "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
    started = time.perf_counter()
    loaded = load_yaml(text)
    assert time.perf_counter() - started < 0.5
    assert loaded["l8"][0] is loaded["l7"]  # shared, never copied


def test_every_document_of_a_stream_is_bounded() -> None:
    with pytest.raises(yaml.YAMLError) as refused:
        list(load_yaml_all(f"a: 1\n---\nb: {nested(MAX_DEPTH)}\n"))
    assert yaml_problem(refused.value) == "line 3: lists and mappings nested deeper than 100 levels"


def test_text_that_is_not_utf8_is_one_line_naming_the_byte() -> None:
    assert decode_text("gpu: ü\n".encode(), "c.conf") == "gpu: ü\n"
    with pytest.raises(TextError, match=r"^c\.conf: not UTF-8 text \(byte 0xff at offset 5\)$"):
        decode_text(b"gpu: \xff\xfe\n", "c.conf")
