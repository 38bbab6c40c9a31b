"""Custom resources checked against their CRD's structural schema, in kube-apiserver's words.

A CRD version's `schema.openAPIV3Schema` is compiled once into a `Node` tree; every write of an
object of that kind is checked against it as apiextensions-apiserver does (kube-openapi's validator,
its errors turned into field errors), so `minMember: abc` in a PodGroup is 422
`PodGroup.scheduling.volcano.sh "x" is invalid: spec.minMember: Invalid value: "string":
spec.minMember in body must be of type integer: "string"`. Checked: `type` (object, array, string,
integer, number, boolean; `x-kubernetes-int-or-string` as integer or string), `minimum` and
`maximum` (exclusive too), `enum`, `pattern` on strings and `required`, through `properties`,
`additionalProperties` and `items`. Not done: defaults, pruning of unknown fields, formats, CEL
rules. `null` passes anywhere (Go leaves the zero value). On update, a part of the object equal to
what was stored is not checked again (kube's validation ratcheting), so an object stored before a
schema tightened can still be changed elsewhere.

Schemas come from CRDs: those of the kinds the server serves without a CRD (Volcano's PodGroup and
Queue, from the CRDs the kit ships in deploy/crds, bundled as package data) and every CRD written to
the server (a CRD's schema replaces the bundled one for its kind). Called by `operations.Api`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, cast

import yaml

from runtimekit.cluster.apiserver.crds import CustomResourceDefinition
from runtimekit.cluster.apiserver.errors import Cause, field_invalid, field_required, field_unsupported
from runtimekit.kube.objects import JsonObject

# the CRDs of deploy/crds, bundled (tests/deploy keeps the copies equal)
BUNDLED_CRDS = ("crd-podgroups.yaml", "crd-queues.yaml")
_SKIPPED_AT_ROOT = frozenset({"apiVersion", "kind", "metadata"})  # checked by the server itself


@dataclass(frozen=True)
class Node:
    """One place of a schema: the JSON types it allows (empty: any) and its constraints."""

    types: frozenset[str] = frozenset()
    properties: Mapping[str, Node] = field(default_factory=dict)
    additional: Node | None = None
    items: Node | None = None
    required: tuple[str, ...] = ()
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    exclusive_maximum: bool = False
    enum: tuple[Any, ...] | None = None
    pattern: re.Pattern[str] | None = None
    pattern_text: str = ""
    # read by server-side apply (fieldpaths.Place): how lists and maps merge and who owns their parts
    list_type: str = ""  # x-kubernetes-list-type: atomic (the default), set or map
    list_keys: tuple[str, ...] = ()  # x-kubernetes-list-map-keys
    map_type: str = ""  # x-kubernetes-map-type: granular (the default) or atomic


def compile_schema(schema: JsonObject) -> Node:
    """The `Node` of an openAPIV3Schema (or a part of one)."""
    given = schema.get("type")
    types = frozenset([given] if isinstance(given, str) else given or ())
    if schema.get("x-kubernetes-int-or-string"):
        types = frozenset({"integer", "string"})  # as apiextensions converts it for validation
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    items = schema.get("items")
    pattern = schema.get("pattern")
    enum = schema.get("enum")
    return Node(
        types=types,
        properties={k: compile_schema(v) for k, v in properties.items()} if isinstance(properties, dict) else {},
        additional=compile_schema(additional) if isinstance(additional, dict) else None,
        items=compile_schema(items) if isinstance(items, dict) else None,
        required=tuple(schema.get("required") or ()),
        minimum=_number(schema.get("minimum")),
        exclusive_minimum=bool(schema.get("exclusiveMinimum")),
        maximum=_number(schema.get("maximum")),
        exclusive_maximum=bool(schema.get("exclusiveMaximum")),
        enum=tuple(enum) if isinstance(enum, list) else None,
        pattern=re.compile(pattern) if isinstance(pattern, str) else None,
        pattern_text=pattern if isinstance(pattern, str) else "",
        list_type=str(schema.get("x-kubernetes-list-type") or ""),
        list_keys=tuple(str(k) for k in schema.get("x-kubernetes-list-map-keys") or ()),
        map_type=str(schema.get("x-kubernetes-map-type") or ""),
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def crd_schemas(crd: CustomResourceDefinition) -> dict[tuple[str, str], Node]:
    """(apiVersion, kind) -> the compiled schema, for every version of `crd` that has one."""
    spec = crd.get("spec") or {}
    group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
    out: dict[tuple[str, str], Node] = {}
    for version in spec.get("versions") or []:
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict):
            out[(f"{group}/{version.get('name', '')}", kind)] = compile_schema(schema)
    return out


@functools.cache
def bundled_crds() -> tuple[CustomResourceDefinition, ...]:
    """The kit's CRDs of the Volcano kinds the server serves built in (read once; do not change them)."""
    return tuple(
        cast(
            CustomResourceDefinition, yaml.safe_load((resources.files("runtimekit") / "data" / name).read_text("utf-8"))
        )
        for name in BUNDLED_CRDS
    )


@functools.cache
def _bundled() -> dict[tuple[str, str], Node]:
    out: dict[tuple[str, str], Node] = {}
    for crd in bundled_crds():
        out.update(crd_schemas(crd))
    return out


class SchemaSet:
    """The schemas of the custom kinds a server serves. Safe to read from any thread."""

    def __init__(self, schemas: Mapping[tuple[str, str], Node] | None = None) -> None:
        self._schemas = dict(_bundled() if schemas is None else schemas)
        self._lock = threading.Lock()

    def add_crd(self, crd: CustomResourceDefinition) -> None:
        """Check the kinds of `crd` by its schemas from now on (a removed CRD's kinds are not served,
        so its schemas are never asked for; one written again replaces them)."""
        found = crd_schemas(crd)
        if found:
            with self._lock:
                self._schemas = {**self._schemas, **found}

    def node(self, api_version: str, kind: str) -> Node | None:
        """The compiled schema of a custom kind (None when its CRD has none)."""
        return self._schemas.get((api_version, kind))

    def check(self, api_version: str, kind: str, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
        """The field errors of `obj` (an update of `old`, else a create) against its kind's schema."""
        node = self._schemas.get((api_version, kind))
        if node is None:
            return []
        causes: list[Cause] = []
        for key, value in obj.items():
            sub = node.properties.get(key)
            if key in _SKIPPED_AT_ROOT or sub is None:
                continue
            _check(sub, value, None if old is None else old.get(key, _ABSENT), key, causes)
        _required(node, obj, "", causes, skip=_SKIPPED_AT_ROOT)
        return causes


_ABSENT = object()


def _check(node: Node, value: Any, old: Any, path: str, causes: list[Cause]) -> None:
    if value is None or (old is not None and old is not _ABSENT and value == old):
        return  # null passes; what is stored already is not checked again (ratcheting)
    before = len(causes)
    _check_type(node, value, path, causes)
    if len(causes) > before:
        return
    if isinstance(value, dict):
        olds = old if isinstance(old, dict) else {}
        for key, sub in value.items():
            inner = node.properties.get(key) or node.additional
            if inner is not None:
                _check(inner, sub, olds.get(key, _ABSENT), f"{path}.{key}", causes)
        _required(node, value, path, causes)
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            prior = old[i] if isinstance(old, list) and i < len(old) else _ABSENT
            _check(node.items, item, prior, f"{path}[{i}]", causes)
    else:
        _check_scalar(node, value, path, causes)


def _check_type(node: Node, value: Any, path: str, causes: list[Cause]) -> None:
    if not node.types:
        return
    actual = _json_type(value)
    if actual in node.types or (actual == "number" and "integer" in node.types and float(value).is_integer()):
        return
    if actual == "integer" and "number" in node.types:
        return
    wanted = ",".join(sorted(node.types)) if len(node.types) > 1 else next(iter(node.types))
    why = f'{path} in body must be of type {wanted}: "{actual}"'
    causes.append(Cause("FieldValueTypeInvalid", f'Invalid value: "{_go_type(value)}": {why}', path))


def _check_scalar(node: Node, value: Any, path: str, causes: list[Cause]) -> None:
    if node.enum is not None and value not in node.enum:
        causes.append(field_unsupported(path, value, [_enum_text(v) for v in node.enum]))
        return
    if isinstance(value, str):
        if node.pattern is not None and not node.pattern.search(value):
            causes.append(field_invalid(path, value, f"{path} in body should match '{node.pattern_text}'"))
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    low, high = node.minimum, node.maximum
    if low is not None and (value <= low if node.exclusive_minimum else value < low):
        word = "greater than" if node.exclusive_minimum else "greater than or equal to"
        causes.append(field_invalid(path, value, f"{path} in body should be {word} {_go_number(low)}"))
    if high is not None and (value >= high if node.exclusive_maximum else value > high):
        word = "less than" if node.exclusive_maximum else "less than or equal to"
        causes.append(field_invalid(path, value, f"{path} in body should be {word} {_go_number(high)}"))


def _required(node: Node, value: JsonObject, path: str, causes: list[Cause], skip: Iterable[str] = ()) -> None:
    for key in node.required:
        if key not in value and key not in skip:
            causes.append(field_required(f"{path}.{key}" if path else key))


def _json_type(value: Any) -> str:
    """The JSON type kube-openapi names for a value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "array"


def _go_type(value: Any) -> str:
    """The Go type of a decoded JSON value as the field error shows it (reflect's name, or kind)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "map" if isinstance(value, dict) else "slice"


def _go_number(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
