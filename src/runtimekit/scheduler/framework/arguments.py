"""Typed plugin and action arguments, validated when the plugin is built.

Volcano's arguments are a flat map with namespaced keys (`binpack.weight: 10`). `parse_arguments`
maps them onto a frozen dataclass: the `<plugin>.` prefix is optional, camelCase keys map to
snake_case fields, unknown keys and values of the wrong type raise `ArgumentError` naming the key.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class ArgumentError(ValueError):
    """A bad plugin or action argument; the message names the plugin and the key."""


def snake(name: str) -> str:
    return _CAMEL.sub("_", name).replace(".", "_").replace("-", "_").lower()


def _coerce(owner: str, key: str, value: Any, kind: Any) -> Any:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        if value is None:
            return None
        return _coerce(owner, key, value, options[0])
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
            return int(value)
    elif kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif kind is str:
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
    elif origin is tuple:
        items = [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else value
        if isinstance(items, list | tuple):
            (inner, *_rest) = typing.get_args(kind) or (str,)
            return tuple(_coerce(owner, key, item, inner) for item in items)
    elif (origin in (dict, Mapping) or kind is dict) and isinstance(value, Mapping):
        return dict(value)
    name = getattr(kind, "__name__", str(kind))
    raise ArgumentError(f"{owner}: argument {key!r} must be {name}, got {value!r}")


def parse_arguments(
    cls: type[T], owner: str, arguments: Mapping[str, Any], aliases: Mapping[str, str] | None = None
) -> T:
    """Build the frozen dataclass `cls` from Volcano-style arguments; see the module docstring."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    aliases = aliases or {}
    values: dict[str, Any] = {}
    for key, value in arguments.items():
        short = key[len(owner) + 1 :] if key.startswith(owner + ".") else key
        field = aliases.get(short) or aliases.get(key) or snake(short)
        if field not in fields:
            known = sorted({*aliases, *fields})
            raise ArgumentError(f"{owner}: unknown argument {key!r}; known: {', '.join(known)}")
        values[field] = _coerce(owner, key, value, hints[field])
    try:
        return cls(**values)
    except ArgumentError:
        raise
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{owner}: {exc}") from exc
