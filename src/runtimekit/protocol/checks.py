"""Checks of a protocol file as a whole (the per-key checks are in names.py): its version, that a
name stands for one resource only, and that labels, annotations and the MIG prefix do not collide.
Pure functions returning a reason, or None; the loader raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runtimekit.protocol.names import split_names


def read_version(value: object, supported: int) -> tuple[int, str | None]:
    """The version a file says it is written for (1 when it says nothing), and why it cannot be read:
    not a whole number from 1, or newer than `supported`."""
    if value is None:
        return 1, None
    text = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not text.isdigit() or int(text) < 1:
        return 1, f"key 'version' must be a whole number from 1, got {value!r}"
    version = int(text)
    if version > supported:
        return version, (
            f"written for protocol version {version}, but this runtimekit understands versions up to {supported}; "
            "upgrade this component (`runtimekit --version` shows the protocol version it reads)"
        )
    return version, None


def alias_problem(values: Mapping[str, str], kinds: Sequence[str]) -> str | None:
    """Why the resource names and their aliases (`resources.<kind>`, `aliases.<kind>`) are ambiguous:
    one name for two resources, or aliases of a resource the protocol does not have."""
    seen: dict[str, str] = {}
    for kind in kinds:
        named = [(f"resources.{kind}", values[f"resources.{kind}"])]
        named += [(f"aliases.{kind}", name) for name in split_names(values[f"aliases.{kind}"])]
        if len(named) > 1 and not named[0][1]:
            return f"key 'aliases.{kind}' needs resources.{kind}: an alias of a resource the protocol does not have"
        for key, name in named:
            if not name:
                continue
            if name in seen:
                return f"key {key!r} names {name!r}, which {seen[name]} names already"
            seen[name] = key
    return None


def distinct_problem(values: Mapping[str, str], kinds: Sequence[str]) -> str | None:
    """Why two labels or two annotations share a name (one thing would be read as two), or the MIG
    prefix begins a resource's name or alias (that resource would be read as a MIG slice)."""
    for group in ("labels.", "annotations."):
        first: dict[str, str] = {}
        for key in (k for k in values if k.startswith(group) and values[k]):  # "" is a key left out
            if values[key] in first:
                return f"key {key!r} has the same value {values[key]!r} as {first[values[key]]!r}; they must differ"
            first[values[key]] = key
    prefix = values["resources.migPrefix"]
    for kind in kinds:
        named = [(f"resources.{kind}", values[f"resources.{kind}"])]
        named += [(f"aliases.{kind}", name) for name in split_names(values[f"aliases.{kind}"])]
        for key, name in named:
            if name and name.startswith(prefix):
                return (
                    f"key 'resources.migPrefix' has a bad value {prefix!r}: it is a prefix of {key} {name!r}, "
                    "which would be read as a MIG slice"
                )
    return None
