"""Typed configuration from plain mappings (parsed YAML, Volcano plugin arguments): one path for all.

`convert(cls, data, ...)` builds `cls` (a frozen `msgspec.Struct` or a frozen dataclass, nested
ones included) with `msgspec.convert`, after matching the mapping's keys to fields. Users of the
exporter config, the protocol file and scheduler plugin arguments get the same rules:

- **Keys** match a field whatever their case and their `_`, `-` and `.` separators:
  `recoverySeconds`, `recovery_seconds` and `recovery-seconds` are one key. `prefix` (Volcano's
  `<plugin>.`) may stand before a key; `aliases` map other spellings to field names. An unknown key,
  or two spellings of one field, is an error naming the key and listing the known ones.
- **Values** are taken as msgspec's lax mode takes them: a number or a boolean may be written as a
  string (`"3"`, `"0.5"`, `"true"`, `"false"`, `"1"`, `"0"`), a whole float for an int (`2.0`), and
  0 or 1 for a boolean, because ConfigMaps and Volcano's arguments often hold strings. A list field
  also takes one comma-separated string (`"a, b"`). Nothing else is converted: a number is not a
  string, `"yes"` is not a boolean, `1.5` is not an int.
- **Numbers** for a float field must be finite: NaN and infinities (`.nan`, `"inf"`) are refused.
- **Checks** on a value (`Annotated[float, msgspec.Meta(ge=0, description=...)]`) and the type's
  own `__post_init__` run during the conversion.
- **Errors** are `error` (a ValueError subclass the caller names) with a one-line message that
  starts with `where` and names the key as the user wrote it: `health.temperatureCelsius must be a
  non-negative number, got 'hot'`. An error the type's `__post_init__` raises as `error` passes
  through unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

T = TypeVar("T")
_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_WORDS = {
    mi.BoolType: "true or false",
    mi.IntType: "int",
    mi.FloatType: "float",
    mi.StrType: "str",
}
_LISTS = (mi.ListType, mi.VarTupleType, mi.TupleType, mi.SetType, mi.FrozenSetType)
_RECORDS = (mi.StructType, mi.DataclassType)


class ConfigError(ValueError):
    """A bad configuration value or key; the message names the key."""


def canonical(key: str) -> str:
    """The spelling-free form of a key: lower case, without `_`, `-` and `.`."""
    return key.lower().replace("_", "").replace("-", "").replace(".", "")


def convert(
    cls: type[T],
    data: Mapping[str, Any],
    *,
    where: str = "",
    error: type[ValueError] = ConfigError,
    noun: str = "key",
    prefix: str = "",
    aliases: Mapping[str, str] | None = None,
) -> T:
    """`cls` from `data` under the rules of the module docstring."""
    info = _unwrap(mi.type_info(cls))
    if not isinstance(info, _RECORDS):
        raise TypeError(f"{cls!r} is neither a msgspec Struct nor a dataclass")
    shaper = _Shaper(where, error, noun, prefix, aliases or {})
    shaped = shaper.record(info, data, ())
    try:
        return msgspec.convert(shaped, cls, strict=False)
    except msgspec.ValidationError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, error):
            raise cause from None
        raise error(f"{where}{shaper.explain(info, shaped, str(exc))}") from None


def _unwrap(info: mi.Type) -> mi.Type:
    return info.type if isinstance(info, mi.Metadata) else info


class _Shaper:
    """Renames keys to field names, splits comma lists, remembers how the user spelt each key."""

    def __init__(self, where: str, error: type[ValueError], noun: str, prefix: str, aliases: Mapping[str, str]):
        self.where, self.error, self.noun, self.prefix = where, error, noun, prefix
        self.aliases = {canonical(k): v for k, v in aliases.items()}
        self.spelt: dict[tuple[str, ...], str] = {}  # field path -> key path as written

    def record(self, info: mi.StructType | mi.DataclassType, data: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            shown = self.spelt.get(path, "")
            raise self.error(f"{self.where}{shown} must be a mapping, got {data!r}")
        by_key = {canonical(f.encode_name): f for f in info.fields} | {canonical(f.name): f for f in info.fields}
        out: dict[str, Any] = {}
        for key, value in data.items():
            field = self._field(str(key), by_key) if isinstance(key, str) else None
            shown = ".".join(filter(None, (self.spelt.get(path, ""), str(key))))
            if field is None:
                known = ", ".join(sorted({*(f.encode_name for f in info.fields), *self.aliases_for(info)}))
                raise self.error(f"{self.where}unknown {self.noun} {shown!r}; known: {known}")
            if field.encode_name in out:
                raise self.error(f"{self.where}{self.noun} {shown!r} is given twice")
            self.spelt[(*path, field.encode_name)] = shown
            out[field.encode_name] = self.value(_unwrap(field.type), value, (*path, field.encode_name))
        return out

    def aliases_for(self, info: mi.StructType | mi.DataclassType) -> list[str]:
        names = {f.name for f in info.fields}
        return [k for k, v in self.aliases.items() if v in names]

    def _field(self, key: str, by_key: Mapping[str, mi.Field]) -> mi.Field | None:
        name = key[len(self.prefix) :] if self.prefix and key.startswith(self.prefix) else key
        target = self.aliases.get(canonical(name)) or self.aliases.get(canonical(key))
        return by_key.get(canonical(target or name))

    def value(self, info: mi.Type, value: Any, path: tuple[str, ...]) -> Any:
        if _takes_float(info) and _not_finite(value):
            shown = self.spelt.get(path, ".".join(path))
            raise self.error(f"{self.where}{shown} must be a finite number, got {value!r}")
        if isinstance(info, _RECORDS):
            return self.record(info, value, path)
        if isinstance(info, mi.UnionType):
            records = [t for t in info.types if isinstance(t, _RECORDS)]
            if records and isinstance(value, Mapping):
                return self.record(records[0], value, path)
        if isinstance(info, _LISTS) and isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    def explain(self, info: mi.Type, shaped: Any, message: str) -> str:
        """A one-line reason from msgspec's, naming the key as written and what it must be."""
        match = _PATH.search(message)
        if match is None:
            return message
        steps = _STEP.findall(match["path"])
        fields: list[str] = []
        value: Any = shaped
        kind: mi.Type | None = info
        for name, index in steps:
            if name:
                fields.append(name)
                kind = _field_type(kind, name)
                value = value.get(name) if isinstance(value, Mapping) else None
            elif index.isdigit() and isinstance(value, list) and int(index) < len(value):
                value, kind = value[int(index)], _item_type(kind)
            else:
                value, kind = _MISSING, _item_type(kind)
        shown = self.spelt.get(tuple(fields), ".".join(fields))
        suffix = "".join(f"[{index}]" for name, index in steps[len(fields) :] if index)
        if message.startswith("Object missing required field"):
            return f"{shown}{suffix}: {message[: match.start()]}"
        got = "" if value is _MISSING else f", got {value!r}"
        return f"{shown}{suffix} must be {describe(kind)}{got}"


_MISSING = object()


def _takes_float(info: mi.Type) -> bool:
    info = _unwrap(info)
    if isinstance(info, mi.UnionType):
        return any(isinstance(_unwrap(t), mi.FloatType) for t in info.types)
    return isinstance(info, mi.FloatType)


def _not_finite(value: Any) -> bool:
    """NaN or an infinity, as a number or as the text lax conversion would read as one."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        try:
            return not math.isfinite(float(value))
        except ValueError:
            return False
    return False


def _field_type(info: mi.Type | None, name: str) -> mi.Type | None:
    info = _unwrap(info) if info is not None else None
    if isinstance(info, mi.UnionType):
        info = next((t for t in info.types if isinstance(t, _RECORDS)), None)
    if isinstance(info, _RECORDS):
        return next((f.type for f in info.fields if f.encode_name == name), None)
    return None


def _item_type(info: mi.Type | None) -> mi.Type | None:
    info = _unwrap(info) if info is not None else None
    if isinstance(info, _LISTS) and not isinstance(info, mi.TupleType):
        return info.item_type
    if isinstance(info, mi.DictType):
        return info.value_type
    return None


def describe(info: mi.Type | None) -> str:
    """What a value of this type is, in the words errors use."""
    if isinstance(info, mi.Metadata):
        described = (info.extra_json_schema or {}).get("description")
        return str(described) if described else describe(info.type)
    if isinstance(info, mi.UnionType):
        return " or ".join(describe(t) for t in info.types)
    if isinstance(info, mi.NoneType):
        return "null"
    if isinstance(info, _LISTS):
        return "a list"
    if isinstance(info, mi.DictType | mi.StructType | mi.DataclassType):
        return "a mapping"
    if isinstance(info, mi.LiteralType):
        return "one of " + ", ".join(map(str, info.values))
    for kind, word in _WORDS.items():
        if isinstance(info, kind):
            return word
    return "of another type"
