"""The one typed configuration path: key spellings, lax values, comma lists, nested records, and
one-line errors that name the key as written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import pytest

from runtimekit.base.config import ConfigError, convert

NonNegative = Annotated[float, msgspec.Meta(ge=0, description="a non-negative number")]


class Inner(msgspec.Struct, frozen=True, rename="camel"):
    recovery_seconds: NonNegative = 300.0
    ignored_xids: tuple[int, ...] = (13,)


class Outer(msgspec.Struct, frozen=True, rename="camel"):
    node_name: str = ""
    enabled: bool = True
    inner: Inner = Inner()


class Refused(ValueError):
    pass


@dataclass(frozen=True)
class Args:
    weight: float = 1.0
    learn_every: int = 256
    resources: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise Refused("plugin: weight must not be negative")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({}, Outer(), id="defaults"),
        pytest.param({"nodeName": "n1"}, Outer(node_name="n1"), id="camel"),
        pytest.param({"node_name": "n1"}, Outer(node_name="n1"), id="snake"),
        pytest.param({"node-name": "n1"}, Outer(node_name="n1"), id="kebab"),
        pytest.param({"enabled": "false"}, Outer(enabled=False), id="bool-string"),
        pytest.param({"enabled": 0}, Outer(enabled=False), id="bool-zero"),
        pytest.param({"inner": {"recoverySeconds": "5"}}, Outer(inner=Inner(recovery_seconds=5.0)), id="number-string"),
        pytest.param({"inner": {"ignoredXids": "13, 31"}}, Outer(inner=Inner(ignored_xids=(13, 31))), id="comma-list"),
        pytest.param({"inner": {"ignoredXids": [1, "2"]}}, Outer(inner=Inner(ignored_xids=(1, 2))), id="list"),
    ],
)
def test_structs_take_every_spelling_and_lax_values(data: dict[str, Any], expected: Outer) -> None:
    assert convert(Outer, data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"scrape": 1}, "c.yaml: unknown key 'scrape'; known: enabled, inner, nodeName", id="unknown"),
        pytest.param({"inner": {"recoverySecs": 1}}, "unknown key 'inner.recoverySecs'", id="unknown-nested"),
        pytest.param({"nodeName": "a", "node_name": "b"}, "key 'node_name' is given twice", id="twice"),
        pytest.param({"nodeName": 5}, "c.yaml: nodeName must be str, got 5", id="not-a-string"),
        pytest.param({"enabled": "yes"}, "enabled must be true or false, got 'yes'", id="not-a-bool"),
        pytest.param({"inner": 5}, "inner must be a mapping, got 5", id="not-a-mapping"),
        pytest.param(
            {"inner": {"recoverySeconds": -1}},
            "c.yaml: inner.recoverySeconds must be a non-negative number, got -1",
            id="constraint",
        ),
        pytest.param({"inner": {"ignored_xids": [1, "x"]}}, "inner.ignored_xids[1] must be int, got 'x'", id="item"),
    ],
)
def test_errors_name_the_key_as_written(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        convert(Outer, data, where="c.yaml: ")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_dataclasses_with_a_prefix_aliases_and_their_own_checks() -> None:
    args = convert(
        Args,
        {"plugin.weight": "3", "learnEvery": "8", "resources": "a, b", "top": {"x": "1"}, "limit": None},
        prefix="plugin.",
        aliases={"top": "scores"},
        error=Refused,
    )
    assert args == Args(3.0, 8, ("a", "b"), {"x": 1.0}, None)
    with pytest.raises(Refused, match="^plugin: weight must not be negative$"):
        convert(Args, {"weight": -1}, error=Refused)
    with pytest.raises(Refused, match=r"^plugin: unknown argument 'plugin\.wieght'; known: "):
        convert(Args, {"plugin.wieght": 1}, where="plugin: ", noun="argument", prefix="plugin.", error=Refused)
    with pytest.raises(Refused, match="learn_every must be int, got 1.5"):
        convert(Args, {"learn_every": 1.5}, error=Refused)


def test_only_records_can_be_converted() -> None:
    with pytest.raises(TypeError, match="neither a msgspec Struct nor a dataclass"):
        convert(dict, {})
