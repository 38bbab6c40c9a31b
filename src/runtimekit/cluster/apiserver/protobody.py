"""Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), for the
kinds clients send that way.

client-go's typed clientset sends protobuf by default since 1.35 (Helm 4 keeps its releases in Secrets
through one), and kube-apiserver accepts it for every built-in kind. This server decodes the envelope
(`k8s\\x00` + `runtime.Unknown`) and the kinds such clients write: Secret, ConfigMap and the
DeleteOptions of a delete, with the ObjectMeta fields clients set (field numbers from k8s.io/api's
generated.proto). Any other kind is refused with 415, naming the types that work. Answers stay JSON:
clients accept it. Pure functions; called by `bodies.decode_body`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from runtimekit.cluster.apiserver.errors import ApiError, bad_request, unsupported_media_type
from runtimekit.kube.objects import JsonObject

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
Fields = list[tuple[int, int | bytes]]


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


def _text(value: int | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _signed(value: int | bytes) -> int:
    number = int(value) if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number


def _entry(value: int | bytes) -> tuple[str, bytes]:
    fields = dict(_fields(value if isinstance(value, bytes) else b""))
    key, item = fields.get(1, b""), fields.get(2, b"")
    return _text(key), item if isinstance(item, bytes) else b""


def _time(value: int | bytes) -> str:
    fields = dict(_fields(value if isinstance(value, bytes) else b""))
    return datetime.fromtimestamp(_signed(fields.get(1, 0)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner(value: int | bytes) -> JsonObject:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion", 6: "controller", 7: "blockOwnerDeletion"}
    out: JsonObject = {}
    for number, item in _fields(value if isinstance(value, bytes) else b""):
        if number in (6, 7):
            out[names[number]] = bool(item)
        elif number in names:
            out[names[number]] = _text(item)
    return out


def _metadata(value: int | bytes) -> JsonObject:
    strings = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    out: JsonObject = {}
    for number, item in _fields(value if isinstance(value, bytes) else b""):
        if number in strings:
            out[strings[number]] = _text(item)
        elif number in (7, 10):
            out["generation" if number == 7 else "deletionGracePeriodSeconds"] = _signed(item)
        elif number in (8, 9):
            out["creationTimestamp" if number == 8 else "deletionTimestamp"] = _time(item)
        elif number in (11, 12):
            key, text = _entry(item)
            out.setdefault("labels" if number == 11 else "annotations", {})[key] = text.decode()
        elif number == 13:
            out.setdefault("ownerReferences", []).append(_owner(item))
        elif number == 14:
            out.setdefault("finalizers", []).append(_text(item))
    return out


def _map(out: JsonObject, name: str, item: int | bytes, binary: bool) -> None:
    key, value = _entry(item)
    out.setdefault(name, {})[key] = base64.b64encode(value).decode() if binary else value.decode()


def _secret(fields: Fields) -> JsonObject:
    out: JsonObject = {}
    for number, item in fields:
        if number == 1:
            out["metadata"] = _metadata(item)
        elif number in (2, 4):
            _map(out, "data" if number == 2 else "stringData", item, binary=number == 2)
        elif number == 3:
            out["type"] = _text(item)
        elif number == 5:
            out["immutable"] = bool(item)
    return out


def _config_map(fields: Fields) -> JsonObject:
    out: JsonObject = {}
    for number, item in fields:
        if number == 1:
            out["metadata"] = _metadata(item)
        elif number in (2, 3):
            _map(out, "data" if number == 2 else "binaryData", item, binary=number == 3)
        elif number == 4:
            out["immutable"] = bool(item)
    return out


def _delete_options(fields: Fields) -> JsonObject:
    out: JsonObject = {}
    for number, item in fields:
        if number == 1:
            out["gracePeriodSeconds"] = _signed(item)
        elif number == 2:
            pre = dict(_fields(item if isinstance(item, bytes) else b""))
            out["preconditions"] = {k: _text(pre[n]) for n, k in ((1, "uid"), (2, "resourceVersion")) if n in pre}
        elif number == 3:
            out["orphanDependents"] = bool(item)
        elif number == 4:
            out["propagationPolicy"] = _text(item)
        elif number == 5:
            out.setdefault("dryRun", []).append(_text(item))
    return out


_KINDS: dict[str, Callable[[Fields], JsonObject]] = {
    "Secret": _secret,
    "ConfigMap": _config_map,
    "DeleteOptions": _delete_options,
}


def decode_protobuf(body: bytes, kind: str) -> JsonObject:
    """The JSON form of a protobuf-encoded `kind` (415 for kinds not decoded here, 400 for bad bytes)."""
    if not body.startswith(_MAGIC):
        raise bad_request(f"{kind} in protobuf: the body does not start with the k8s protobuf prefix")
    try:
        envelope = dict(_fields(body[len(_MAGIC) :]))
        type_meta = envelope.get(1, b"")
        meta = dict(_fields(type_meta)) if isinstance(type_meta, bytes) else {}
        api_version, sent_kind = _text(meta.get(1, b"")), _text(meta.get(2, b"")) or kind
        decoder = _KINDS.get(sent_kind)
        if decoder is None:
            raise unsupported_media_type(PROTOBUF, ["application/json", "application/yaml"])
        raw = envelope.get(2, b"")
        obj = decoder(list(_fields(raw if isinstance(raw, bytes) else b"")))
    except ApiError:
        raise
    except (ValueError, UnicodeDecodeError, KeyError) as exc:
        raise bad_request(f"{kind} in protobuf could not be decoded: {exc}") from None
    if api_version:
        obj = {"apiVersion": api_version, "kind": sent_kind, **obj}
    return obj
