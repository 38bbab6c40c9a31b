"""The three patch formats the server accepts, applied to plain JSON values.

- `merge_patch`: RFC 7386 JSON merge patch (`application/merge-patch+json`).
- `strategic_merge`: Kubernetes strategic merge patch (`application/strategic-merge-patch+json`), as
  kubectl apply sends it: lists merge by their patch merge key (`patchschema.py`), `$patch: replace |
  delete | merge`, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>` and `$retainKeys`.
- `json_patch`: RFC 6902 JSON patch (`application/json-patch+json`).

Inputs are never mutated. A malformed patch raises `PatchFormatError` (the server answers 400); a
JSON patch that does not apply raises `PatchApplyError` (422). Pure functions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, TypedDict

from runtimekit.cluster.apiserver.patchschema import EMPTY, MergeList, Node, Struct
from runtimekit.kube.objects import JsonObject

Operation = TypedDict("Operation", {"op": str, "path": str, "value": Any, "from": str}, total=False)
"""One RFC 6902 operation (written as a call: `from` is a Python keyword); `json_patch` checks `op`
and `path` before any is applied."""

_DELETE = object()
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


class PatchFormatError(ValueError):
    """The patch document itself is malformed."""


class PatchApplyError(ValueError):
    """A well-formed patch that cannot be applied to this object (a JSON patch path or test failed)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(original: JsonObject, patch: JsonObject, schema: Struct) -> JsonObject:
    """Apply a strategic merge patch to an object of the kind `schema` describes."""
    if not isinstance(patch, Mapping):
        raise PatchFormatError("a strategic merge patch must be a JSON object")
    merged = _merge_map(dict(original), patch, schema)
    if merged is _DELETE:
        raise PatchFormatError("a strategic merge patch cannot delete the whole object")
    result: JsonObject = merged
    return result


def _struct(node: Node | None) -> Struct:
    return node if isinstance(node, Struct) else EMPTY


def _merge_map(original: JsonObject, patch: JsonObject, schema: Struct) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _clean({k: v for k, v in patch.items() if k != "$patch"}, schema)
    if directive not in (None, "merge"):
        raise PatchFormatError(f"unknown patch directive {directive!r} in a map")
    result = dict(original)
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE) :]
            if not isinstance(value, list):
                raise PatchFormatError(f"{key} must be a list")
            result[name] = [item for item in result.get(name) or [] if item not in value]
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        _merge_field(result, key, value, schema.fields.get(key))
    for key, value in patch.items():
        if key.startswith(_SET_ORDER):
            name = key[len(_SET_ORDER) :]
            if name in result and isinstance(result[name], list):
                result[name] = _reorder(result[name], value, schema.fields.get(name))
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchFormatError("$retainKeys must be a list of field names")
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_field(result: JsonObject, key: str, value: Any, node: Node | None) -> None:
    if value is None:
        result.pop(key, None)
        return
    current = result.get(key)
    if isinstance(value, dict):
        base = current if isinstance(current, dict) else {}
        merged = _merge_map(base, value, _struct(node))
        if merged is _DELETE:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list) and isinstance(node, MergeList):
        result[key] = _merge_list(current if isinstance(current, list) else [], value, node)
    else:
        result[key] = _clean(value, _struct(node))


def _merge_list(original: list[Any], patch: list[Any], node: MergeList) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_clean(item, node.item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    if node.key is None:
        return list(original) + [item for item in patch if item not in original]
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchFormatError(f"list elements merged by {node.key!r} must be objects, got {item!r}")
        if node.key not in item:
            raise PatchFormatError(f"map: {item} does not contain declared merge key: {node.key}")
        wanted = item[node.key]
        at = next((i for i, old in enumerate(result) if isinstance(old, dict) and old.get(node.key) == wanted), None)
        if item.get("$patch") == "delete":
            result = [old for old in result if not (isinstance(old, dict) and old.get(node.key) == wanted)]
        elif at is None:
            result.append(_clean(item, node.item))
        else:
            merged = _merge_map(result[at], item, node.item)
            if merged is _DELETE:
                del result[at]
            else:
                result[at] = merged
    return result


def _reorder(items: list[Any], order: Any, node: Node | None) -> list[Any]:
    """`$setElementOrder`: listed elements first, in the listed order; the others keep theirs after."""
    if not isinstance(order, list):
        raise PatchFormatError("$setElementOrder must be a list")
    key = node.key if isinstance(node, MergeList) else None

    def ident(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    rank = {_hashable(ident(entry)): i for i, entry in enumerate(order)}
    ordered = sorted((it for it in items if _hashable(ident(it)) in rank), key=lambda it: rank[_hashable(ident(it))])
    rest = [it for it in items if _hashable(ident(it)) not in rank]
    return ordered + rest


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, (dict, list)) else value


def _clean(value: Any, schema: Struct) -> Any:
    """A patch value inserted where nothing was: directives resolved against an empty original."""
    if isinstance(value, dict):
        merged = _merge_map({}, value, schema)
        return {} if merged is _DELETE else merged
    if isinstance(value, list):
        return [_clean(item, schema) for item in value if not (isinstance(item, dict) and "$patch" in item)]
    return value


# --- RFC 6902 -------------------------------------------------------------------------------------

_OPS = {"add", "remove", "replace", "move", "copy", "test"}


def json_patch(document: Any, operations: Any) -> Any:
    """Apply a JSON patch; the document is copied first."""
    if not isinstance(operations, list):
        raise PatchFormatError("a JSON patch must be a list of operations")
    for op in operations:
        if not isinstance(op, dict) or op.get("op") not in _OPS or not isinstance(op.get("path"), str):
            raise PatchFormatError(f"invalid JSON patch operation: {op!r}")
    doc = copy.deepcopy(document)
    for op in operations:
        doc = _apply_op(doc, op)
    return doc


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFormatError(f"JSON pointer {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            raise PatchApplyError(f"jsonpatch: path {path!r} does not exist (missing key {part!r})")
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, path, allow_end=False)]
    raise PatchApplyError(f"jsonpatch: path {path!r} goes through a scalar")


def _index(node: list[Any], part: str, path: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(node)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise PatchApplyError(f"jsonpatch: invalid array index {part!r} in {path!r}")
    index = int(part)
    limit = len(node) if allow_end else len(node) - 1
    if index > limit:
        raise PatchApplyError(f"jsonpatch: array index {index} out of bounds in {path!r}")
    return index


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[parts[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, parts[-1], path, allow_end=True), value)
    else:
        raise PatchApplyError(f"jsonpatch: cannot add at {path!r}: parent is a scalar")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchApplyError("jsonpatch: cannot remove the whole document")
    parent = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if parts[-1] not in parent:
            raise PatchApplyError(f"jsonpatch: remove of missing path {path!r}")
        return doc, parent.pop(parts[-1])
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, parts[-1], path, allow_end=False))
    raise PatchApplyError(f"jsonpatch: cannot remove {path!r}: parent is a scalar")


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _value(op: Operation) -> Any:
    if "value" not in op:
        raise PatchFormatError(f"JSON patch operation {op['op']!r} at {op['path']!r} lacks 'value'")
    return copy.deepcopy(op["value"])


def _from(op: Operation) -> str:
    source = op.get("from")
    if not isinstance(source, str):
        raise PatchFormatError(f"JSON patch operation {op['op']!r} at {op['path']!r} lacks 'from'")
    return source


def _apply_op(doc: Any, op: Operation) -> Any:
    kind, path = op["op"], op["path"]
    if kind == "add":
        return _add(doc, path, _value(op))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        value = _value(op)
        if not _pointer(path):
            return value
        doc, _ = _remove(doc, path)
        return _add(doc, path, value)
    if kind == "move":
        doc, value = _remove(doc, _from(op))
        return _add(doc, path, value)
    if kind == "copy":
        return _add(doc, path, copy.deepcopy(_get(doc, _from(op))))
    if not _json_equal(_get(doc, path), _value(op)):
        raise PatchApplyError(f"jsonpatch: test failed at {path!r}")
    return doc
