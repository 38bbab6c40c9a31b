"""Decode an object into its kind's shape, as kube-apiserver decodes JSON into its Go types.

`decode(shape, obj, ...)` removes from the object (in place) every field the definitions do not know
(kube-apiserver's Go structs have nowhere to keep them), and:
- a value of the wrong JSON type (a list where an object goes, a string for an integer, an int32
  out of range) is 400 BadRequest, worded by Go's decoder: `Pod in version "v1" cannot be handled as a
  Pod: json: cannot unmarshal array into Go struct field Container.spec.containers.resources of type
  v1.ResourceRequirements`;
- a resource quantity that does not parse is 400 with resource.Quantity's message
  (`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`);
- unknown fields follow the request's `fieldValidation`: Strict refuses them all (400 `strict decoding
  error: unknown field "spec.foo"`), Warn (the server's default) drops them with a `Warning` header
  each, Ignore drops them silently. kubectl sends Strict unless told `--validate=false|warn|ignore`.
`null` is accepted anywhere (Go leaves the zero value). Free-form places (RawExtension, FieldsV1,
a CRD's JSON) are kept as given. Warnings go to the request's collector (`collect_warnings`).
Pure functions apart from that collector; called by `operations.Api`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from contextvars import ContextVar, Token
from enum import StrEnum
from typing import Any

from runtimekit.cluster.apiserver.errors import ApiError, bad_request
from runtimekit.cluster.apiserver.openapi import Kind, Shape
from runtimekit.kube.objects import JsonObject
from runtimekit.kube.semantics.quantity import number_quantity, quantity_problem, quantity_text_problem

_INT_RANGE = {32: (-(1 << 31), (1 << 31) - 1), 64: (-(1 << 63), (1 << 63) - 1)}

_warnings: ContextVar[list[str] | None] = ContextVar("apiserver_warnings", default=None)


class FieldValidation(StrEnum):
    """The `fieldValidation` query parameter."""

    STRICT = "Strict"
    WARN = "Warn"
    IGNORE = "Ignore"

    @classmethod
    def parse(cls, text: str) -> FieldValidation:
        if not text:
            return cls.WARN
        for member in cls:
            if member.value == text:
                return member
        raise bad_request(f"fieldValidation must be one of Ignore, Warn, or Strict, got {text!r}")


class collect_warnings:  # lower-case: callers use it as the function it was, `with collect_warnings() as w:`
    """Collect the warnings raised while handling one request (sent back as `Warning` headers). A
    class rather than a generator context manager: every request enters one."""

    __slots__ = ("_collected", "_token")

    def __init__(self) -> None:
        self._collected: list[str] = []
        self._token: Token[list[str] | None] | None = None

    def __enter__(self) -> list[str]:
        self._token = _warnings.set(self._collected)
        return self._collected

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _warnings.reset(self._token)


def warn(text: str) -> None:
    collected = _warnings.get()
    if collected is not None and text not in collected:
        collected.append(text)


class _Mismatch(Exception):
    """A value Go's decoder cannot put in its place; `text` is Go's error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "number"


class _Walk:
    """One decode, in place: unknown fields are deleted as they are met (and listed in order)."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    @staticmethod
    def mismatch(value: object, shape: Shape, struct: str, fpath: str, what: str = "") -> _Mismatch:
        shown = what or _json_kind(value)
        if struct:
            return _Mismatch(
                f"json: cannot unmarshal {shown} into Go struct field {struct}.{fpath} of type {shape.go_type}"
            )
        return _Mismatch(f"json: cannot unmarshal {shown} into Go value of type {shape.go_type}")

    def struct(self, shape: Shape, value: JsonObject, fpath: str, spath: str) -> None:
        """Check the fields of one struct; `fpath` names it as Go's errors do (no list indices),
        `spath` as the strict decoder does (with them)."""
        fields = shape.fields
        if not fields.keys() >= value.keys():
            sprefix = f"{spath}." if spath else ""
            for key in [k for k in value if k not in fields]:
                self.unknown.append(sprefix + key)
                del value[key]
        for key, sub in value.items():
            if sub is None:
                continue
            inner = fields[key]
            kind = inner.kind
            if kind is Kind.STRING:
                if type(sub) is not str:
                    raise self.mismatch(sub, inner, shape.struct, _join(fpath, key))
            elif kind is Kind.ANY:
                continue
            elif kind is Kind.QUANTITY:
                value[key] = text = _canonical(sub)
                self.scalar(inner, text, shape.struct, _join(fpath, key))
            elif kind is Kind.STRUCT:
                if type(sub) is not dict:
                    raise self.mismatch(sub, inner, shape.struct, _join(fpath, key))
                self.struct(inner, sub, _join(fpath, key), _join(spath, key))
            else:
                self.value(inner, sub, shape.struct, _join(fpath, key), _join(spath, key))

    def value(self, shape: Shape, value: Any, struct: str, fpath: str, spath: str) -> None:
        """Check a value that is not a struct field's string: a list, map, struct or other scalar."""
        if value is None:
            return
        kind = shape.kind
        if kind is Kind.STRUCT:
            if type(value) is not dict:
                raise self.mismatch(value, shape, struct, fpath)
            self.struct(shape, value, fpath, spath)
        elif kind is Kind.LIST:
            if type(value) is not list:
                raise self.mismatch(value, shape, struct, fpath)
            item = shape.item
            assert item is not None
            if item.kind is Kind.STRING and all(type(v) is str for v in value):
                return
            for i, v in enumerate(value):
                self.value(item, v, struct, fpath, f"{spath}[{i}]")
        elif kind is Kind.MAP:
            if type(value) is not dict:
                raise self.mismatch(value, shape, struct, fpath)
            item = shape.item
            assert item is not None
            if item.kind is Kind.STRING and all(type(v) is str for v in value.values()):
                return
            if item.kind is Kind.QUANTITY:
                _fine_quantities(value)  # numbers as their canonical text; what is left is checked below
            for k, v in value.items():
                self.value(item, v, struct, fpath, f"{spath}[{k}]")
        elif kind is Kind.STRING:
            if type(value) is not str:
                raise self.mismatch(value, shape, struct, fpath)
        else:
            self.scalar(shape, value, struct, fpath)

    def scalar(self, shape: Shape, value: Any, struct: str, fpath: str) -> None:
        kind = shape.kind
        if kind is Kind.ANY:
            return
        if kind is Kind.QUANTITY:
            problem = quantity_text_problem(value) if type(value) is str else quantity_problem(value)
            if problem:
                raise _Mismatch(problem)
        elif kind is Kind.INT_OR_STRING:
            if type(value) is not str:
                self.integer(_INT32, value, struct, fpath)
        elif kind is Kind.INTEGER:
            self.integer(shape, value, struct, fpath)
        elif kind is Kind.NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.mismatch(value, shape, struct, fpath)
        elif kind is Kind.BOOLEAN:
            if not isinstance(value, bool):
                raise self.mismatch(value, shape, struct, fpath)
        elif kind is Kind.BYTES:
            if not isinstance(value, str):
                raise self.mismatch(value, shape, struct, fpath)
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise _Mismatch(f"illegal base64 data at input byte {_bad_base64_at(value)}") from None
        else:  # pragma: no cover
            raise AssertionError(f"unhandled shape {kind}")

    def integer(self, shape: Shape, value: Any, struct: str, fpath: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.mismatch(value, shape, struct, fpath)
        low, high = _INT_RANGE[shape.bits]
        if isinstance(value, float) and not value.is_integer():
            raise self.mismatch(value, shape, struct, fpath, f"number {value!r}")
        if not low <= value <= high:
            raise self.mismatch(value, shape, struct, fpath, f"number {value!r}")


_INT32 = Shape(Kind.INTEGER, "int32", bits=32)
_STRING, _ANY, _STRUCT, _LIST, _MAP, _QUANTITY = Kind.STRING, Kind.ANY, Kind.STRUCT, Kind.LIST, Kind.MAP, Kind.QUANTITY


def _fine(shape: Shape, value: JsonObject) -> bool:
    """True when a struct decodes with nothing to report: the quick first pass (no paths kept).
    Anything else (an unknown field, a doubtful value) goes through `_Walk`, which words it."""
    fields = shape.fields
    for key, sub in value.items():
        inner = fields.get(key)
        if inner is None:  # an unknown field
            return False
        if sub is None:
            continue
        kind = inner.kind
        if kind is _STRING:
            if type(sub) is not str:
                return False
        elif kind is _STRUCT:
            if type(sub) is not dict or not _fine(inner, sub):
                return False
        elif kind is _QUANTITY:
            value[key] = text = _canonical(sub)
            if type(text) is not str or quantity_text_problem(text):
                return False
        elif kind is not _ANY and not _fine_value(inner, sub):
            return False
    return True


def _fine_value(shape: Shape, value: Any) -> bool:
    kind = shape.kind
    if kind is _LIST or kind is _MAP:
        item = shape.item
        assert item is not None
        values: Iterable[Any]
        if kind is _LIST:
            if type(value) is not list:
                return False
            values = value
        else:
            if type(value) is not dict:
                return False
            values = value.values()
        item_kind = item.kind
        if item_kind is _STRING:
            return all(type(v) is str for v in values)
        if item_kind is _QUANTITY and kind is _MAP:
            return _fine_quantities(value)
        if item_kind is _STRUCT:
            return all(type(v) is dict and _fine(item, v) for v in values)
        return all(v is None or _fine_value(item, v) for v in values)
    if kind is _QUANTITY:
        return type(value) is str and not quantity_text_problem(value)
    if kind is _STRUCT:
        return type(value) is dict and _fine(shape, value)
    if kind is _STRING:
        return type(value) is str
    if kind is Kind.INTEGER:
        low, high = _INT_RANGE[shape.bits]
        return type(value) is int and low <= value <= high
    if kind is Kind.BOOLEAN:
        return type(value) is bool
    if kind is Kind.INT_OR_STRING:
        return type(value) is str or (type(value) is int and -(1 << 31) <= value < (1 << 31))
    if kind is Kind.NUMBER:
        return type(value) is int or type(value) is float
    return False  # base64 text and the like: the full walk checks them


def _fine_quantities(amounts: JsonObject) -> bool:
    """A map of quantities (requests, limits, allocatable): numbers become their canonical text in
    place, as kube-apiserver stores them; True when every value is then a valid quantity."""
    for key, given in amounts.items():
        amounts[key] = value = _canonical(given)
        if value is not None and (type(value) is not str or quantity_text_problem(value)):
            return False
    return True


def _canonical(value: Any) -> Any:
    """A number given for a quantity as the text kube-apiserver stores; anything else as it is (a
    number no quantity can hold too: the checks word it)."""
    if type(value) is int or type(value) is float:
        return number_quantity(value) or value
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _bad_base64_at(text: str) -> int:
    allowed = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    for at, byte in enumerate(text.encode()):
        if byte not in allowed:
            return at
    return len(text.encode()) - len(text.encode()) % 4


def decode(shape: Shape, obj: JsonObject, kind: str, version: str, validation: FieldValidation) -> JsonObject:
    """`obj` made what kube-apiserver would keep (see the module docstring), in place; raises ApiError 400
    (unknown fields may already be gone from `obj` then)."""
    if _fine(shape, obj):
        return obj
    walk = _Walk()
    try:
        walk.struct(shape, obj, "", "")
    except _Mismatch as exc:
        raise _cannot_handle(kind, version, exc.text) from None
    if walk.unknown:
        if validation is FieldValidation.STRICT:
            listed = ", ".join(f'unknown field "{path}"' for path in walk.unknown)
            raise _cannot_handle(kind, version, f"strict decoding error: {listed}")
        if validation is FieldValidation.WARN:
            for path in walk.unknown:
                warn(f'unknown field "{path}"')
    return obj


def _cannot_handle(kind: str, version: str, why: str) -> ApiError:
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {why}')
