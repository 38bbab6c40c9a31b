"""The OpenAPI v3 documents of what the embedded API server serves, one per group-version, as
kube-apiserver publishes them under /openapi/v3 (and the v2 document is made from them, `openapiv2`).

The built-in kinds come from the shipped definitions (`k8s-schemas.json.gz`, the structure, and
`k8s-openapi-docs.json.gz`, descriptions, `required` and the `x-kubernetes-*` extensions such as
`x-kubernetes-group-version-kind` and the patch strategies kubectl's apply reads); custom kinds from
their CustomResourceDefinitions' schemas (named `<reversed group>.<version>.<Kind>`, as apiextensions
names them), or an object that keeps any field when a CRD has none. Each group-version document lists
the paths of its resources with their operations (the PATCH operation's `x-kubernetes-group-version-kind`
and query parameters are what kubectl checks before it asks for server-side field validation or a
server-side dry run) and the schemas they reach. Pure functions; `openapiserve` caches the result.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, TypedDict, cast

from runtimekit.cluster.apiserver.crds import CustomResourceDefinition
from runtimekit.cluster.apiserver.openapi import Schema, available_versions, backfilled_kinds, definitions_document
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.kube.objects import JsonObject

REF_V3 = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META, LIST_META = _META + "ObjectMeta", _META + "ListMeta"
STATUS, DELETE_OPTIONS, PATCH = _META + "Status", _META + "DeleteOptions", _META + "Patch"
_SCALE = "io.k8s.api.autoscaling.v1.Scale"
_SCALE_GVK = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_API_VERSION_DOC = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
_KIND_DOC = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)
_JSON_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


class DocsDocument(TypedDict):
    """The shipped documentation file (see scripts/gen_k8s_schemas.py)."""

    versions: dict[str, dict[str, str]]
    pool: dict[str, dict[str, str]]
    parts: dict[str, JsonObject]


@functools.cache
def _docs_document() -> DocsDocument:
    raw = (resources.files("runtimekit") / "data" / "k8s-openapi-docs.json.gz").read_bytes()
    loaded: DocsDocument = json.loads(gzip.decompress(raw))
    return loaded


def _from_shipped(schema: Schema) -> JsonObject:
    """A shipped (JSON Schema) definition in OpenAPI v3 form: `$ref`s to components, no null types."""
    out: JsonObject = {}
    for key, value in schema.items():
        if key == "$ref":
            out["$ref"] = REF_V3 + str(value).rsplit("/", 1)[-1]
        elif key == "type":
            types = [value] if isinstance(value, str) else [t for t in cast(list[str], value) if t != "null"]
            if types:
                out["type"] = types[0]
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {name: _from_shipped(cast(Schema, sub)) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _from_shipped(cast(Schema, value))
        elif key == "oneOf" and isinstance(value, list):
            out["oneOf"] = [_from_shipped(cast(Schema, sub)) for sub in value]
        else:
            out[key] = value
    return out


@functools.cache
def builtin_definitions(version: str) -> Mapping[str, JsonObject]:
    """Every shipped definition of `version` in OpenAPI v3 form with its documentation (compiled
    once per process; callers copy before changing one)."""
    structure = definitions_document()
    docs = _docs_document()
    names, doc_names = structure["versions"][version], docs["versions"].get(version, {})
    out: dict[str, JsonObject] = {}
    for name, key in names.items():
        schema = _from_shipped(structure["pool"][key])
        refs = docs["pool"].get(doc_names.get(name, ""), {})
        for prop, part in refs.items():
            extras = docs["parts"][part]
            if prop == "":
                schema.update(extras)
            elif prop in schema.get("properties", {}):
                schema["properties"][prop].update(extras)
        if name == _INT_OR_STRING:
            schema["format"] = "int-or-string"
        for prop, sub in (schema.get("properties") or {}).items():
            if "$ref" in sub and len(sub) > 1:  # OpenAPI 3.0 ignores a $ref's siblings: kube wraps it
                schema["properties"][prop] = {"allOf": [{"$ref": sub.pop("$ref")}], **sub}
        out[name] = schema
    if backfilled_kinds(version):  # and the definitions the served resource.k8s.io kinds reach there
        newest = builtin_definitions(available_versions()[-1])
        out.update({name: schema for name, schema in newest.items() if name not in out})
    return out


def builtin_kinds(version: str) -> Mapping[str, str]:
    """`apps/v1/Deployment` -> its shipped definition name, for the kinds a server reporting
    `version` describes as built in (`backfilled_kinds` too)."""
    return {**definitions_document()["kinds"][version], **backfilled_kinds(version)}


def custom_name(group: str, version: str, kind: str) -> str:
    """`scheduling.volcano.sh`, `v1beta1`, `PodGroup` -> `sh.volcano.scheduling.v1beta1.PodGroup`."""
    return ".".join([*reversed(group.split(".")), version, kind])


def _gvk(info: ResourceInfo, kind: str) -> JsonObject:
    return {"group": info.group, "kind": kind, "version": info.version}


def custom_schemas(info: ResourceInfo, crd_schema: JsonObject | None) -> dict[str, JsonObject]:
    """The definitions of a custom kind and its list, as apiextensions-apiserver publishes them."""
    schema: JsonObject = copy.deepcopy(crd_schema) if crd_schema else {"x-kubernetes-preserve-unknown-fields": True}
    schema.setdefault("type", "object")
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"description": _API_VERSION_DOC, "type": "string"}
    properties["kind"] = {"description": _KIND_DOC, "type": "string"}
    properties["metadata"] = {"$ref": REF_V3 + OBJECT_META}
    schema["x-kubernetes-group-version-kind"] = [_gvk(info, info.kind)]
    name = custom_name(info.group, info.version, info.kind)
    listing: JsonObject = {
        "description": f"{info.kind}List is a list of {info.kind}",
        "properties": {
            "apiVersion": {"description": _API_VERSION_DOC, "type": "string"},
            "items": {"description": f"List of {info.plural}.", "items": {"$ref": REF_V3 + name}, "type": "array"},
            "kind": {"description": _KIND_DOC, "type": "string"},
            "metadata": {"$ref": REF_V3 + LIST_META},
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [_gvk(info, info.list_kind)],
    }
    return {name: schema, name + "List": listing}


def crd_version_schemas(crds: Iterable[CustomResourceDefinition]) -> dict[tuple[str, str, str], JsonObject]:
    """(group, version, plural) -> that version's openAPIV3Schema, for every CRD that declares one."""
    out: dict[tuple[str, str, str], JsonObject] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural", "")
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                out[(spec.get("group", ""), str(version.get("name", "")), str(plural))] = schema
    return out


def _camel(text: str) -> str:
    return text[:1].upper() + text[1:]


def _group_id(group: str) -> str:
    """The group as operation ids spell it: `core`, `apps`, `rbacAuthorization`, `schedulingVolcanoSh`."""
    if not group:
        return "core"
    parts = group.removesuffix(".k8s.io").replace("-", ".").split(".")
    return parts[0] + "".join(_camel(p) for p in parts[1:])


def _param(name: str, where: str, description: str, kind: str = "string", required: bool = False) -> JsonObject:
    param: JsonObject = {"description": description, "in": where, "name": name, "schema": {"type": kind}}
    if required:
        param["required"] = True
    if where == "query" and kind != "boolean":
        param["schema"]["uniqueItems"] = True
    return param


_DRY_RUN = _param("dryRun", "query", "When present, indicates that modifications should not be persisted.")
_FIELD_MANAGER = _param("fieldManager", "query", "fieldManager is a name associated with the actor or entity.")
_FIELD_VALIDATION = _param(
    "fieldValidation", "query", "fieldValidation instructs the server on how to handle unknown or duplicate fields."
)
_FORCE = _param("force", "query", 'Force is going to "force" Apply requests.', "boolean")
_PRETTY = _param("pretty", "query", "If 'true', then the output is pretty printed.")
_DELETE_PARAMS = [
    _DRY_RUN,
    _param("gracePeriodSeconds", "query", "The duration in seconds before the object should be deleted.", "integer"),
    _param("orphanDependents", "query", "Deprecated: please use the PropagationPolicy.", "boolean"),
    _param("propagationPolicy", "query", "Whether and how garbage collection will be performed."),
]
_LIST_PARAMS = [
    _param("allowWatchBookmarks", "query", "allowWatchBookmarks requests watch events with type BOOKMARK.", "boolean"),
    _param("continue", "query", "The continue option should be set when retrieving more results from the server."),
    _param("fieldSelector", "query", "A selector to restrict the list of returned objects by their fields."),
    _param("labelSelector", "query", "A selector to restrict the list of returned objects by their labels."),
    _param("limit", "query", "limit is a maximum number of responses to return for a list call.", "integer"),
    _param(
        "resourceVersion",
        "query",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    _param(
        "resourceVersionMatch", "query", "resourceVersionMatch determines how resourceVersion is applied to list calls."
    ),
    _param("sendInitialEvents", "query", "`sendInitialEvents=true` may be set together with `watch=true`.", "boolean"),
    _param("timeoutSeconds", "query", "Timeout for the list/watch call.", "integer"),
    _param("watch", "query", "Watch for changes to the described resources and return them as a stream.", "boolean"),
]


def _content(types: Iterable[str], ref: str) -> JsonObject:
    return {media: {"schema": {"$ref": REF_V3 + ref}} for media in types}


class _Operations:
    """The paths of one resource (and its status and scale subresources)."""

    def __init__(self, info: ResourceInfo, item: str, listing: str) -> None:
        self.info, self.item, self.listing = info, item, listing
        self.prefix = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
        self.ids = _group_id(info.group) + _camel(info.version)

    def _op(
        self, verb: str, action: str, what: str, suffix: str, body: str, params: list[JsonObject], out: str
    ) -> JsonObject:
        info = self.info
        scope = "Namespaced" if info.namespaced and suffix != "ForAllNamespaces" else ""
        op: JsonObject = {
            "description": what,
            "operationId": f"{verb}{_camel(self.ids)}{scope}{info.kind}{suffix}",
            "parameters": params,
            "responses": {
                "200": {"description": "OK", "content": _content(_JSON_TYPES, out)},
                "401": {"description": "Unauthorized"},
            },
            "tags": [self.ids],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _SCALE_GVK if out == _SCALE else _gvk(info, info.kind),
        }
        if body:
            types: tuple[str, ...] = _PATCH_TYPES if action == "patch" else _JSON_TYPES
            if action == "patch" and not info.strategic_merge:
                types = tuple(t for t in types if "strategic" not in t)
            op["requestBody"] = {"content": _content(types, body), "required": True}
        if action in ("post", "put"):
            op["responses"]["201"] = {"description": "Created", "content": _content(_JSON_TYPES, out)}
        if action == "patch":
            op["responses"]["201"] = {"description": "Created", "content": _content(_JSON_TYPES, out)}
        return op

    def paths(self) -> dict[str, JsonObject]:
        info, verbs = self.info, set(self.info.verbs)
        where = f"/namespaces/{{namespace}}/{info.plural}" if info.namespaced else f"/{info.plural}"
        collection, item = self.prefix + where, self.prefix + where + "/{name}"
        scope = [_param("namespace", "path", "object name and auth scope", required=True)] if info.namespaced else []
        named = [_param("name", "path", f"name of the {info.kind}", required=True), *scope, _PRETTY]
        write = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
        out: dict[str, JsonObject] = {}
        ops: JsonObject = {"parameters": [*scope, _PRETTY]}
        if "list" in verbs:
            ops["get"] = self._op(
                "list", "list", f"list or watch objects of kind {info.kind}", "", "", _LIST_PARAMS, self.listing
            )
        if "create" in verbs:
            ops["post"] = self._op("create", "post", f"create a {info.kind}", "", self.item, write, self.item)
        if "deletecollection" in verbs:
            params = [*_DELETE_PARAMS, *_LIST_PARAMS]
            ops["delete"] = self._op(
                "deletecollection",
                "deletecollection",
                f"delete collection of {info.kind}",
                "",
                DELETE_OPTIONS,
                params,
                STATUS,
            )
        out[collection] = ops
        ops = {"parameters": named}
        if "get" in verbs:
            ops["get"] = self._op("read", "get", f"read the specified {info.kind}", "", "", [], self.item)
        if "update" in verbs:
            ops["put"] = self._op(
                "replace", "put", f"replace the specified {info.kind}", "", self.item, write, self.item
            )
        if "patch" in verbs:
            ops["patch"] = self._op(
                "patch", "patch", f"partially update the specified {info.kind}", "", PATCH, [*write, _FORCE], self.item
            )
        if "delete" in verbs:
            ops["delete"] = self._op(
                "delete", "delete", f"delete a {info.kind}", "", DELETE_OPTIONS, _DELETE_PARAMS, STATUS
            )
        out[item] = ops
        if info.namespaced and "list" in verbs:
            every = {
                "get": self._op(
                    "list",
                    "list",
                    f"list or watch objects of kind {info.kind}",
                    "ForAllNamespaces",
                    "",
                    _LIST_PARAMS,
                    self.listing,
                )
            }
            out[f"{self.prefix}/{info.plural}"] = {"parameters": [_PRETTY], "get": every["get"]}
        for sub, ref in (("status", self.item), ("scale", _SCALE)):
            if sub in info.subresources:
                title = _camel(sub)
                out[f"{item}/{sub}"] = {
                    "parameters": named,
                    "get": self._op("read", "get", f"read {sub} of the specified {info.kind}", title, "", [], ref),
                    "put": self._op(
                        "replace", "put", f"replace {sub} of the specified {info.kind}", title, ref, write, ref
                    ),
                    "patch": self._op(
                        "patch",
                        "patch",
                        f"partially update {sub} of the specified {info.kind}",
                        title,
                        PATCH,
                        [*write, _FORCE],
                        ref,
                    ),
                }
        return out


def group_version_key(group: str, version: str) -> str:
    """The name /openapi/v3 lists a group-version under: `api/v1`, `apis/apps/v1`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _reachable(roots: Iterable[str], definitions: Mapping[str, JsonObject]) -> list[str]:
    """The definitions `roots` refer to, directly or not (sorted)."""
    seen: set[str] = set()
    stack = [name for name in roots if name in definitions]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(ref for ref in _refs(definitions[name]) if ref in definitions and ref not in seen)
    return sorted(seen)


def _refs(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value.removeprefix(REF_V3)
            else:
                yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _security() -> JsonObject:
    return {
        "BearerToken": {
            "description": "Bearer Token authentication",
            "in": "header",
            "name": "authorization",
            "type": "apiKey",
        }
    }


def group_version_documents(
    infos: Iterable[ResourceInfo],
    builtin_kinds: Mapping[str, str],
    builtin: Mapping[str, JsonObject],
    crd_schemas: Mapping[tuple[str, str, str], JsonObject],
    git_version: str,
) -> dict[str, JsonObject]:
    """`group_version_key` -> the OpenAPI v3 document of that group-version. `builtin_kinds` maps
    `apps/v1/Deployment` to its shipped definition name."""
    by_gv: dict[str, list[ResourceInfo]] = {}
    for info in infos:
        by_gv.setdefault(group_version_key(info.group, info.version), []).append(info)
    documents: dict[str, JsonObject] = {}
    for key, members in sorted(by_gv.items()):
        definitions: dict[str, JsonObject] = dict(builtin)
        paths: dict[str, JsonObject] = {}
        roots = [STATUS, DELETE_OPTIONS, PATCH]
        for info in sorted(members, key=lambda i: i.plural):
            item = builtin_kinds.get(f"{info.api_version}/{info.kind}", "")
            listing = builtin_kinds.get(f"{info.api_version}/{info.list_kind}", "")
            if info.custom or not item:
                made = custom_schemas(info, crd_schemas.get((info.group, info.version, info.plural)))
                definitions.update(made)
                item, listing = list(made)
            elif not listing:
                listing = item  # a kind served without a list type (bindings, evictions)
            paths.update(_Operations(info, item, listing).paths())
            roots += [item, listing]
            if "scale" in info.subresources:
                roots.append(_SCALE)
        schemas = {name: definitions[name] for name in _reachable(roots, definitions)}
        documents[key] = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": git_version},
            "paths": dict(sorted(paths.items())),
            "components": {"schemas": schemas, "securitySchemes": _security()},
        }
    return documents
