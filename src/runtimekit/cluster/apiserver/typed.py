"""Decode an object into its kind's shape, as kube-apiserver decodes JSON into its Go types.

`decode(shape, obj, ...)` returns the object with every field the definitions do not know removed
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
import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from enum import StrEnum
from typing import Any

from runtimekit.cluster.apiserver.errors import ApiError, bad_request
from runtimekit.cluster.apiserver.openapi import Kind, Shape

QUANTITY_SPLIT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_MSG = f"quantities must match the regular expression '{QUANTITY_SPLIT}'"
QUANTITY_SUFFIX_MSG = "unable to parse quantity's suffix"
_SPLIT_RE = re.compile(QUANTITY_SPLIT)
_NUMBER_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")
_SUFFIX_RE = re.compile(r"^(?:[eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
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


@contextlib.contextmanager
def collect_warnings() -> Iterator[list[str]]:
    """Collect the warnings raised while handling one request (sent back as `Warning` headers)."""
    collected: list[str] = []
    token = _warnings.set(collected)
    try:
        yield collected
    finally:
        _warnings.reset(token)


def warn(text: str) -> None:
    collected = _warnings.get()
    if collected is not None and text not in collected:
        collected.append(text)


def quantity_problem(value: object) -> str:
    """Why `value` (a JSON value) is not a resource.Quantity; "" when it is one."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return QUANTITY_FORMAT_MSG
    text = value.strip() if isinstance(value, str) else repr(value)
    match = _SPLIT_RE.match(text)
    if not match or not _NUMBER_RE.match(match.group(1)):
        return QUANTITY_FORMAT_MSG
    if not _SUFFIX_RE.match(match.group(2)):
        return QUANTITY_SUFFIX_MSG
    return ""


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
    """One decode: the unknown fields it met, in order."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    def mismatch(self, value: object, shape: Shape, struct: str, fpath: str, what: str = "") -> _Mismatch:
        shown = what or _json_kind(value)
        if struct:
            return _Mismatch(
                f"json: cannot unmarshal {shown} into Go struct field {struct}.{fpath} of type {shape.go_type}"
            )
        return _Mismatch(f"json: cannot unmarshal {shown} into Go value of type {shape.go_type}")

    def value(self, shape: Shape, value: Any, struct: str, fpath: str, spath: str) -> Any:
        """`value` decoded into `shape`; `struct`/`fpath` name it as Go's errors do, `spath` (with
        list indices) as the strict decoder does."""
        if value is None:
            return None
        kind = shape.kind
        if kind is Kind.STRUCT:
            if not isinstance(value, dict):
                raise self.mismatch(value, shape, struct, fpath)
            return self.struct(shape, value, fpath, spath)
        if kind is Kind.STRING:
            if not isinstance(value, str):
                raise self.mismatch(value, shape, struct, fpath)
            return value
        if kind is Kind.LIST:
            if not isinstance(value, list):
                raise self.mismatch(value, shape, struct, fpath)
            item = shape.item
            assert item is not None
            if item.kind in (Kind.STRING, Kind.ANY) and all(isinstance(v, str) for v in value):
                return value
            return [self.value(item, v, struct, fpath, f"{spath}[{i}]") for i, v in enumerate(value)]
        if kind is Kind.MAP:
            if not isinstance(value, dict):
                raise self.mismatch(value, shape, struct, fpath)
            item = shape.item
            assert item is not None
            if item.kind is Kind.STRING and all(isinstance(v, str) for v in value.values()):
                return value
            return {k: self.value(item, v, struct, fpath, f"{spath}[{k}]") for k, v in value.items()}
        return self.scalar(shape, value, struct, fpath)

    def struct(self, shape: Shape, value: dict[str, Any], fpath: str, spath: str) -> dict[str, Any]:
        fields = shape.fields
        out: dict[str, Any] = {}
        prefix, sprefix = (f"{fpath}." if fpath else ""), (f"{spath}." if spath else "")
        for key, sub in value.items():
            inner = fields.get(key)
            if inner is None:
                self.unknown.append(f"{sprefix}{key}")
                continue
            if sub is None or inner.kind is Kind.ANY:
                out[key] = sub
            else:
                out[key] = self.value(inner, sub, shape.struct, prefix + key, sprefix + key)
        return out

    def scalar(self, shape: Shape, value: Any, struct: str, fpath: str) -> Any:
        kind = shape.kind
        if kind is Kind.ANY:
            return value
        if kind is Kind.QUANTITY:
            problem = quantity_problem(value)
            if problem:
                raise _Mismatch(problem)
            return value
        if kind is Kind.INT_OR_STRING:
            if isinstance(value, str):
                return value
            return self.integer(Shape(Kind.INTEGER, "int32", bits=32), value, struct, fpath)
        if kind is Kind.INTEGER:
            return self.integer(shape, value, struct, fpath)
        if kind is Kind.NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.mismatch(value, shape, struct, fpath)
            return value
        if kind is Kind.BOOLEAN:
            if not isinstance(value, bool):
                raise self.mismatch(value, shape, struct, fpath)
            return value
        if kind is Kind.BYTES:
            if not isinstance(value, str):
                raise self.mismatch(value, shape, struct, fpath)
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise _Mismatch(f"illegal base64 data at input byte {_bad_base64_at(value)}") from None
            return value
        raise AssertionError(f"unhandled shape {kind}")  # pragma: no cover

    def integer(self, shape: Shape, value: Any, struct: str, fpath: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.mismatch(value, shape, struct, fpath)
        low, high = _INT_RANGE[shape.bits]
        if isinstance(value, float) and not value.is_integer():
            raise self.mismatch(value, shape, struct, fpath, f"number {value!r}")
        if not low <= value <= high:
            raise self.mismatch(value, shape, struct, fpath, f"number {value!r}")
        return int(value) if isinstance(value, float) else value


def _bad_base64_at(text: str) -> int:
    allowed = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    for at, byte in enumerate(text.encode()):
        if byte not in allowed:
            return at
    return len(text.encode()) - len(text.encode()) % 4


def decode(shape: Shape, obj: dict[str, Any], kind: str, version: str, validation: FieldValidation) -> dict[str, Any]:
    """`obj` as kube-apiserver would keep it (see the module docstring); raises ApiError 400."""
    walk = _Walk()
    try:
        decoded = walk.struct(shape, obj, "", "")
    except _Mismatch as exc:
        raise _cannot_handle(kind, version, exc.text) from None
    if walk.unknown:
        if validation is FieldValidation.STRICT:
            listed = ", ".join(f'unknown field "{path}"' for path in walk.unknown)
            raise _cannot_handle(kind, version, f"strict decoding error: {listed}")
        if validation is FieldValidation.WARN:
            for path in walk.unknown:
                warn(f'unknown field "{path}"')
    return decoded


def _cannot_handle(kind: str, version: str, why: str) -> ApiError:
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {why}')
