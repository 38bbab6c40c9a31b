"""The OpenAPI v2 (Swagger 2.0) document, made from the v3 group-version documents, and its protobuf form.

kube-apiserver serves /openapi/v2 as JSON and as gnostic's `openapi.v2.Document` protobuf
(`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), the only form client-go's
`OpenAPISchema()` asks for: kubectl reads it for `explain --output plaintext-openapiv2`, for client-side
validation when a server lacks field validation, and for the patch strategies of apply when it does
not use v3. `swagger(documents)` merges the v3 documents (refs to `#/definitions/`, a lone `allOf`
back to its `$ref`, v3-only keywords dropped, request bodies as body parameters); `encode(swagger)`
writes the protobuf by hand (field numbers from gnostic's OpenAPIv2.proto), keeping what kubectl
reads. Pure functions; called by `openapiserve`.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from typing import Any

from runtimekit.cluster.apiserver.openapidocs import REF_V3
from runtimekit.kube.objects import JsonObject

REF_V2 = "#/definitions/"
_V3_ONLY = frozenset({"oneOf", "anyOf", "not", "nullable", "allOf"})
_ONE_TYPE = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
}


def _schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: JsonObject = {}
    for key, value in schema.items():
        if key == "$ref":
            out[key] = REF_V2 + str(value).removeprefix(REF_V3)
        elif key == "allOf" and isinstance(value, list) and len(value) == 1 and "$ref" in value[0]:
            out["$ref"] = REF_V2 + str(value[0]["$ref"]).removeprefix(REF_V3)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key not in _V3_ONLY:
            out[key] = _schema(value)
    return out


def _operation(op: JsonObject) -> JsonObject:
    out: JsonObject = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    out["parameters"] = [_parameter(p) for p in op.get("parameters", [])]
    body = op.get("requestBody")
    if body:
        content: JsonObject = body["content"]
        out["consumes"] = sorted(content)
        schema = next(iter(content.values()))["schema"]
        out["parameters"].append({"in": "body", "name": "body", "required": True, "schema": _schema(schema)})
    responses: JsonObject = {}
    produces: set[str] = set()
    for code, response in op.get("responses", {}).items():
        answer: JsonObject = {"description": response.get("description", "")}
        content = response.get("content") or {}
        if content:
            produces.update(content)
            answer["schema"] = _schema(next(iter(content.values()))["schema"])
        responses[code] = answer
    out["responses"] = responses
    out["produces"] = sorted(produces)
    out["schemes"] = ["https"]
    return out


def _parameter(param: JsonObject) -> JsonObject:
    out: JsonObject = {k: v for k, v in param.items() if k != "schema"}
    out.update(param.get("schema") or {})
    return out


def swagger(documents: Iterable[JsonObject], git_version: str) -> JsonObject:
    """One Swagger 2.0 document of every path and definition of the v3 `documents`."""
    definitions: JsonObject = {}
    paths: JsonObject = {}
    for document in documents:
        for name, schema in document["components"]["schemas"].items():
            if name not in definitions:
                definitions[name] = {**_schema(schema), **_ONE_TYPE.get(name, {})}
        for path, item in document["paths"].items():
            converted: JsonObject = {}
            for method, value in item.items():
                if method == "parameters":
                    converted[method] = [_parameter(p) for p in value]
                else:
                    converted[method] = _operation(value)
            paths[path] = converted
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": git_version},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    }


# protobuf ---------------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _text(number: int, value: object) -> bytes:
    text = str(value)
    return _bytes(number, text.encode()) if text else b""


def _flag(number: int, value: object) -> bytes:
    return _varint(number << 3) + b"\x01" if value is True else b""


def _int(number: int, value: object) -> bytes:
    return _varint(number << 3) + _varint(value) if isinstance(value, int) and value > 0 else b""


def _double(number: int, value: object) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return b""
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(value: object) -> bytes:
    """gnostic `Any`: the value as YAML (JSON is YAML), field 2."""
    return _text(2, json.dumps(value))


def _extensions(number: int, schema: JsonObject) -> bytes:
    return b"".join(
        _bytes(number, _text(1, key) + _bytes(2, _any(value))) for key, value in schema.items() if key.startswith("x-")
    )


def encode_schema(schema: JsonObject) -> bytes:
    """gnostic `Schema`."""
    parts = [
        _text(1, schema.get("$ref", "")),
        _text(2, schema.get("format", "")),
        _text(3, schema.get("title", "")),
        _text(4, schema.get("description", "")),
    ]
    if "default" in schema:
        parts.append(_bytes(5, _any(schema["default"])))
    parts += [
        _double(7, schema.get("maximum")),
        _flag(8, schema.get("exclusiveMaximum")),
        _double(9, schema.get("minimum")),
        _flag(10, schema.get("exclusiveMinimum")),
        _int(11, schema.get("maxLength")),
        _int(12, schema.get("minLength")),
        _text(13, schema.get("pattern", "")),
        _int(14, schema.get("maxItems")),
        _int(15, schema.get("minItems")),
        _flag(16, schema.get("uniqueItems")),
    ]
    parts += [_text(19, name) for name in schema.get("required") or []]
    parts += [_bytes(20, _any(value)) for value in schema.get("enum") or []]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        parts.append(_bytes(21, _bytes(1, encode_schema(extra))))
    elif isinstance(extra, bool):
        parts.append(_bytes(21, _varint(2 << 3) + (b"\x01" if extra else b"\x00")))
    kind = schema.get("type")
    if kind:
        parts.append(_bytes(22, b"".join(_text(1, t) for t in ([kind] if isinstance(kind, str) else kind))))
    items = schema.get("items")
    if isinstance(items, dict):
        parts.append(_bytes(23, _bytes(1, encode_schema(items))))
    properties = schema.get("properties") or {}
    if properties:
        named = (_bytes(1, _text(1, name) + _bytes(2, encode_schema(sub))) for name, sub in properties.items())
        parts.append(_bytes(25, b"".join(named)))
    parts += [_flag(27, schema.get("readOnly")), _extensions(31, schema)]
    return b"".join(parts)


def _encode_parameter(param: JsonObject) -> bytes:
    """gnostic `ParametersItem` holding a body, query or path `Parameter`."""
    where = param.get("in", "")
    if where == "body":
        body = (
            _text(1, param.get("description", ""))
            + _text(2, param.get("name", ""))
            + _text(3, where)
            + _flag(4, param.get("required"))
            + _bytes(5, encode_schema(param.get("schema") or {}))
        )
        return _bytes(1, _bytes(1, body))
    head = _flag(1, param.get("required")) + _text(2, where) + _text(3, param.get("description", ""))
    head += _text(4, param.get("name", ""))
    if where == "path":
        sub = _bytes(4, head + _text(5, param.get("type", "")))
    else:
        sub = _bytes(3, head + _text(6, param.get("type", "")) + _flag(20, param.get("uniqueItems")))
    return _bytes(1, _bytes(2, sub))


def _encode_operation(op: JsonObject) -> bytes:
    parts = [_text(1, tag) for tag in op.get("tags", [])]
    parts += [_text(3, op.get("description", "")), _text(5, op.get("operationId", ""))]
    parts += [_text(6, media) for media in op.get("produces", [])]
    parts += [_text(7, media) for media in op.get("consumes", [])]
    parts += [_bytes(8, _encode_parameter(p)) for p in op.get("parameters", [])]
    codes = b""
    for code, response in op.get("responses", {}).items():
        answer = _text(1, response.get("description", ""))
        if "schema" in response:
            answer += _bytes(2, _bytes(1, encode_schema(response["schema"])))
        codes += _bytes(1, _text(1, code) + _bytes(2, _bytes(1, answer)))
    parts.append(_bytes(9, codes))
    parts += [_text(10, scheme) for scheme in op.get("schemes", [])]
    parts.append(_extensions(13, op))
    return b"".join(parts)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def encode(document: JsonObject) -> bytes:
    """gnostic `openapi.v2.Document` of a `swagger()` document."""
    info = document.get("info") or {}
    paths = b""
    for path, item in document.get("paths", {}).items():
        body = b"".join(_bytes(_METHODS[m], _encode_operation(op)) for m, op in item.items() if m in _METHODS)
        body += b"".join(_bytes(9, _encode_parameter(p)) for p in item.get("parameters", []))
        paths += _bytes(2, _text(1, path) + _bytes(2, body))
    definitions = b"".join(
        _bytes(1, _text(1, name) + _bytes(2, encode_schema(schema)))
        for name, schema in document.get("definitions", {}).items()
    )
    return b"".join(
        [
            _text(1, document.get("swagger", "2.0")),
            _bytes(2, _text(1, info.get("title", "")) + _text(2, info.get("version", ""))),
            _bytes(8, paths),
            _bytes(9, definitions),
        ]
    )
