"""Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), for the
kinds clients send that way.

client-go's typed clientset sends protobuf by default since 1.35 (Helm 4 keeps its releases in Secrets
through one), and kube-apiserver accepts it for every built-in kind. This server decodes the envelope
(`k8s\\x00` + `runtime.Unknown`) and the object in it by the field table of its message, shipped as
`k8s-proto.json.gz` (scripts/gen_k8s_proto.py reads Kubernetes' generated.proto files): every built-in
kind the server serves, DeleteOptions, Eviction, Scale and Binding. A kind without a table (custom
resources, which clients never send in protobuf) is refused with 415. Answers stay JSON: clients
accept it. Pure functions; called by `bodies.decode_body`.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from typing import Any, TypedDict

from runtimekit.cluster.apiserver.errors import ApiError, bad_request, unsupported_media_type
from runtimekit.kube.objects import JsonObject

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_SPECIAL = frozenset(
    {
        _META + "Time",
        _META + "MicroTime",
        _META + "FieldsV1",
        _QUANTITY,
        _INT_OR_STRING,
        "k8s.io.apimachinery.pkg.runtime.RawExtension",
    }
)
_SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64", "double", "float"})
_SCALAR_BYTES = frozenset({"string", "bytes"})
_NOTHING = object()


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one message: an int for varints and fixed, bytes for length-delimited."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("truncated field")
            yield number, data[at : at + size]
            at += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            yield number, int.from_bytes(data[at : at + width], "little")
            at += width
        else:
            raise ValueError(f"unsupported wire type {wire}")


class ProtoDocument(TypedDict):
    """The shipped field table (scripts/gen_k8s_proto.py): message -> [[number, json name, type, label]]."""

    sources: dict[str, str]
    messages: dict[str, list[tuple[int, str, str, str]]]


@functools.cache
def _messages() -> dict[str, dict[int, tuple[str, str, str]]]:
    raw = (resources.files("runtimekit") / "data" / "k8s-proto.json.gz").read_bytes()
    document: ProtoDocument = json.loads(gzip.decompress(raw))
    return {
        name: {number: (field, kind, label) for number, field, kind, label in fields}
        for name, fields in document["messages"].items()
    }


def message_name(api_version: str, kind: str) -> str:
    """`apps/v1`, `Deployment` -> `k8s.io.api.apps.v1.Deployment` (as scripts/gen_k8s_proto.py names them)."""
    if kind == "DeleteOptions":
        return _META + "DeleteOptions"
    group, _, version = api_version.rpartition("/")
    return f"k8s.io.api.{group.split('.')[0] if group else 'core'}.{version}.{kind}"


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: int | bytes) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode() if kind == "bytes" else value.decode()
    if kind == "bool":
        return bool(value)
    if kind == "double":
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    if kind == "float":
        return struct.unpack("<f", value.to_bytes(4, "little"))[0]
    number = _signed(value)
    return number - (1 << 32) if kind == "int32" and number >= 1 << 31 else number


def _special(kind: str, data: bytes) -> Any:
    """The JSON form of the types that do not encode as a plain object; _NOTHING for an unset Time."""
    fields = dict(_fields(data))
    if kind in (_META + "Time", _META + "MicroTime"):
        seconds, nanos = _signed(int(fields.get(1, 0))), int(fields.get(2, 0))
        if not seconds and not nanos:
            return _NOTHING  # a zero Time, which JSON writes as null and clients leave out
        moment = datetime.fromtimestamp(seconds, UTC)
        if kind.endswith("MicroTime"):
            return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == _QUANTITY:
        return _scalar("string", fields.get(1, b""))
    if kind == _INT_OR_STRING:
        if fields.get(1, 0):
            return _scalar("string", fields.get(3, b""))
        return _scalar("int32", fields.get(2, 0))
    raw = fields.get(1, b"")  # RawExtension, FieldsV1: JSON bytes
    return json.loads(raw) if isinstance(raw, bytes) and raw else {}


def _decode(message: str, data: bytes) -> JsonObject:
    table = _messages().get(message)
    if table is None:
        raise ValueError(f"no field table for {message}")
    out: JsonObject = {}
    for number, value in _fields(data):
        field = table.get(number)
        if field is None:
            continue  # a field newer than the shipped table: dropped, as an unknown JSON field is
        name, kind, label = field
        if label == "m":
            entry = dict(_fields(value if isinstance(value, bytes) else b""))
            item = _value(kind, entry.get(2, b"" if kind in _SCALAR_BYTES or kind not in _SCALARS else 0))
            out.setdefault(name, {})[_scalar("string", entry.get(1, b""))] = item
            continue
        decoded = _value(kind, value)
        if label == "r":
            out.setdefault(name, []).append(decoded)
        elif decoded is not _NOTHING and decoded != "":
            out[name] = decoded  # an empty string is how proto2 writes an unset string: JSON leaves it out
    return out


def _value(kind: str, value: int | bytes) -> Any:
    if kind in _SCALARS:
        return _scalar(kind, value)
    data = value if isinstance(value, bytes) else b""
    if kind in _SPECIAL:
        return _special(kind, data)
    return _decode(kind, data)


def decode_protobuf(body: bytes, kind: str) -> JsonObject:
    """The JSON form of a protobuf-encoded object (415 for kinds without a field table, 400 for bad bytes)."""
    if not body.startswith(_MAGIC):
        raise bad_request(f"{kind} in protobuf: the body does not start with the k8s protobuf prefix")
    try:
        envelope = dict(_fields(body[len(_MAGIC) :]))
        type_meta = envelope.get(1, b"")
        meta = dict(_fields(type_meta)) if isinstance(type_meta, bytes) else {}
        api_version, sent_kind = _scalar("string", meta.get(1, b"")), _scalar("string", meta.get(2, b"")) or kind
        message = message_name(api_version, sent_kind)
        if message not in _messages():
            raise unsupported_media_type(PROTOBUF, ["application/json", "application/yaml"])
        raw = envelope.get(2, b"")
        obj = _decode(message, raw if isinstance(raw, bytes) else b"")
    except ApiError:
        raise
    except (ValueError, UnicodeDecodeError, KeyError, struct.error) as exc:
        raise bad_request(f"{kind} in protobuf could not be decoded: {exc}") from None
    if api_version:
        obj = {"apiVersion": api_version, "kind": sent_kind, **obj}
    return obj
