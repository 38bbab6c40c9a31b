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
from collections.abc import Mapping
from typing import Any, TypeVar

from runtimekit.base.config import ConfigError, convert

T = TypeVar("T")


class ArgumentError(ConfigError):
    """A bad plugin or action argument; the message names the plugin and the key."""


def parse_arguments(
    cls: type[T], owner: str, arguments: Mapping[str, Any], aliases: Mapping[str, str] | None = None
) -> T:
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
