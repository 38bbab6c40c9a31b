"""Kubernetes' OpenAPI definitions, compiled once per version into `Shape` trees for decoding.

The definitions ship as package data (`runtimekit/data/k8s-schemas.json.gz`, written by
scripts/gen_k8s_schemas.py from the `kubernetes-validate` package): for each minor version 1.27-1.35,
the structural part of every definition. `shapes_for("1.31")` compiles the newest version not newer
than the one asked for (the oldest for older ones) and caches it; `ShapeSet.root(api_version, kind)`
is the shape of a served kind, None for kinds the definitions do not know (custom resources).

A `Shape` says what Go's decoder expects at one place of an object: a struct with its fields, a map,
a list, a scalar, a resource quantity, an int-or-string, or anything (RawExtension, FieldsV1, JSON).
Shapes of recursive definitions (JSONSchemaProps) refer back to themselves. Pure data after compiling.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from typing import TypedDict

_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

Schema = TypedDict(
    "Schema",
    {
        "$ref": str,
        "type": "str | list[str]",
        "format": str,
        "properties": "dict[str, Schema]",
        "additionalProperties": "Schema | bool",
        "items": "Schema",
        "oneOf": "list[Schema]",
    },
    total=False,
)
"""The structural part of one OpenAPI (JSON Schema) definition, as the shipped file keeps it."""


class Definitions(TypedDict):
    """The shipped file: the distinct schemas, and per minor version its definition names (to a
    schema of `pool`) and its served kinds (`apps/v1/Deployment` to a definition name)."""

    pool: dict[str, Schema]
    versions: dict[str, dict[str, str]]
    kinds: dict[str, dict[str, str]]


class Kind(Enum):
    STRUCT = "struct"
    MAP = "map"
    LIST = "list"
    STRING = "string"
    BYTES = "bytes"  # base64 text ([]byte)
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    QUANTITY = "quantity"
    INT_OR_STRING = "intorstring"
    ANY = "any"


@dataclass(eq=False)
class Shape:
    """What one place of an object must hold. `go_type` is the Go type as Go's errors print it;
    `struct` the Go struct name of a STRUCT (the `Pod` of `Go struct field Pod.spec`)."""

    kind: Kind
    go_type: str
    struct: str = ""
    fields: dict[str, Shape] = field(default_factory=dict)
    item: Shape | None = None  # a MAP's values, a LIST's items
    bits: int = 64  # INTEGER width


ANY = Shape(Kind.ANY, "interface {}")


def _go_name(definition: str) -> str:
    """`io.k8s.api.core.v1.Container` -> `v1.Container` (package and type, as Go prints it)."""
    parts = definition.split(".")
    return f"{parts[-2]}.{parts[-1]}"


class _Compiler:
    def __init__(self, pool: dict[str, Schema], names: dict[str, str]) -> None:
        self._pool, self._names = pool, names
        self._done: dict[str, Shape] = {}

    def definition(self, name: str) -> Shape:
        if name in self._done:
            return self._done[name]
        if name == _QUANTITY:
            shape = Shape(Kind.QUANTITY, "resource.Quantity")
        elif name == _INT_OR_STRING:
            shape = Shape(Kind.INT_OR_STRING, "intstr.IntOrString")
        else:
            schema: Schema = self._pool[self._names[name]] if name in self._names else {}
            shape = Shape(Kind.ANY, _go_name(name), struct=name.rsplit(".", 1)[-1])
            self._done[name] = shape  # before the fields: a definition may contain itself
            self._fill(shape, schema)
        self._done[name] = shape
        return shape

    def _fill(self, shape: Shape, schema: Schema) -> None:
        made = self.schema(schema, shape.go_type)
        shape.kind, shape.fields, shape.item, shape.bits = made.kind, made.fields, made.item, made.bits
        if made.kind is not Kind.STRUCT:
            shape.struct = ""

    def schema(self, schema: Schema, go_type: str = "") -> Shape:
        ref = schema.get("$ref")
        if ref:
            return self.definition(str(ref).rsplit("/", 1)[-1])
        types = schema.get("type") or []
        types = [types] if isinstance(types, str) else types
        if "properties" in schema:
            fields = {name: self.schema(sub) for name, sub in schema["properties"].items()}
            return Shape(Kind.STRUCT, go_type or "struct", fields=fields)
        if "object" in types:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                item = self.schema(extra)
                return Shape(Kind.MAP, go_type or f"map[string]{item.go_type}", item=item)
            return Shape(Kind.ANY, go_type or "map[string]interface {}")
        if "array" in types:
            item = self.schema(schema.get("items") or {})
            return Shape(Kind.LIST, go_type or f"[]{item.go_type}", item=item)
        return self._scalar(types, str(schema.get("format", "")), go_type)

    @staticmethod
    def _scalar(types: list[str], fmt: str, go_type: str) -> Shape:
        if "string" in types:
            if fmt == "byte":
                return Shape(Kind.BYTES, go_type or "[]uint8")
            return Shape(Kind.STRING, go_type or "string")
        if "integer" in types:
            bits = 32 if fmt == "int32" else 64
            return Shape(Kind.INTEGER, go_type or f"int{bits}", bits=bits)
        if "number" in types:
            return Shape(Kind.NUMBER, go_type or "float64")
        if "boolean" in types:
            return Shape(Kind.BOOLEAN, go_type or "bool")
        return Shape(Kind.ANY, go_type or "interface {}")


@dataclass(frozen=True)
class ShapeSet:
    """The compiled definitions of one Kubernetes version."""

    version: str
    roots: dict[str, Shape]  # "apps/v1/Deployment" -> shape

    def root(self, api_version: str, kind: str) -> Shape | None:
        return self.roots.get(f"{api_version}/{kind}")


@functools.cache
def _document() -> Definitions:
    raw = (resources.files("runtimekit") / "data" / "k8s-schemas.json.gz").read_bytes()
    loaded: Definitions = json.loads(gzip.decompress(raw))
    return loaded


def definitions_document() -> Definitions:
    """The shipped definitions (read once per process; do not change them)."""
    return _document()


def available_versions() -> list[str]:
    return sorted(_document()["versions"], key=lambda v: tuple(int(p) for p in v.split(".")))


def schema_version(major: int, minor: int) -> str:
    """The shipped definitions used for a server reporting `major.minor`."""
    versions = available_versions()
    older = [v for v in versions if (int(v.split(".")[0]), int(v.split(".")[1])) <= (major, minor)]
    return older[-1] if older else versions[0]


BACKFILLED = "resource.k8s.io/"


@functools.cache
def backfilled_kinds(version: str) -> Mapping[str, str]:
    """`group/version/Kind` -> definition name of the kinds `version` lacks that the kit serves all
    the same: resource.k8s.io v1/v1beta2/v1beta1, whatever version the server reports, described by
    the newest release's definitions (decoding and the published OpenAPI documents alike)."""
    document = _document()
    newest = available_versions()[-1]
    own = document["kinds"][version]
    return {k: n for k, n in document["kinds"][newest].items() if k.startswith(BACKFILLED) and k not in own}


@functools.cache
def shapes_for(version: str) -> ShapeSet:
    """Compile the definitions of `version` (one of `available_versions()`), once per process."""
    document = _document()
    compiler = _Compiler(document["pool"], document["versions"][version])
    roots = {key: compiler.definition(name) for key, name in document["kinds"][version].items()}
    backfilled = backfilled_kinds(version)
    if backfilled:
        newer = _Compiler(document["pool"], document["versions"][available_versions()[-1]])
        roots.update({key: newer.definition(name) for key, name in backfilled.items()})
    return ShapeSet(version, roots)
