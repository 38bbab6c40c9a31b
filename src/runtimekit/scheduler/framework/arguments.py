"""Typed plugin and action arguments, validated when the plugin is built.

Volcano's arguments are a flat map with namespaced keys (`binpack.weight: 10`). `parse_arguments`
maps them onto a frozen dataclass through the kit's one configuration path
(`runtimekit.base.config`): the `<plugin>.` prefix is optional, a key matches its field in any
spelling (`learnEvery`, `learn_every`, `learn-every`), numbers and booleans may be strings (Volcano
writes `"true"`, `"10"`), a list may be one comma-separated string; unknown keys and values of the
wrong type raise `ArgumentError` naming the plugin and the key. The dataclass's `__post_init__`
checks the values and raises `ArgumentError` itself.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from runtimekit.base.config import ConfigError, convert

T = TypeVar("T")
Arguments = Mapping[str, Any]
"""A plugin's or action's arguments as the conf gives them (Volcano's `framework.Arguments`): YAML of
a shape only the plugin knows, read into its typed arguments by `parse_arguments`."""
_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ArgumentError(ConfigError):
    """A bad plugin or action argument; the message names the plugin and the key."""


def parse_arguments(cls: type[T], owner: str, arguments: Arguments, aliases: Mapping[str, str] | None = None) -> T:
    """Build the frozen dataclass `cls` from Volcano-style arguments; see the module docstring.
    `aliases` map other keys (with or without the prefix) to field names."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    return convert(
        cls,
        arguments,
        where=f"{owner}: ",
        error=ArgumentError,
        noun="argument",
        prefix=f"{owner}.",
        aliases=aliases,
    )


def go_duration(text: str) -> float:
    """A Go duration (`1h2m3s4ms5us6ns`, `90s`, `1.5h`, `0`) in seconds, as Volcano's arguments and
    annotations write them; raises ArgumentError naming the text."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    total, at = 0.0, 0
    while at < len(body):
        match = _DURATION.match(body, at)
        if match is None or match.group(1) in ("", "."):
            raise ArgumentError(f"{text!r} is not a duration such as 90s, 15m or 1h30m")
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        at = match.end()
    if not body:
        raise ArgumentError(f"{text!r} is not a duration such as 90s, 15m or 1h30m")
    return sign * total
