"""Field sets of server-side apply: which parts of an object a field manager owns, as structured-merge-diff.

A field path is a tuple of path elements written as `metadata.managedFields[].fieldsV1` writes them:
`f:<field>` (a field of an object or a key of a map), `k:{"name":"nginx"}` (an element of a list
merged by its keys, the keys as compact JSON in key order), `v:"x"` (an element of a set). A `FieldSet`
is a set of such paths; `encode`/`decode` turn it into fieldsV1 (`.` marks a path that is a member
and also has members below it).

`Place` says what the schema knows of one place of an object: a struct's declared fields (from the
kinds' OpenAPI shapes, or a CRD's structural schema), whether a list is atomic, a set or a map keyed by
which fields (`patchschema`'s merge lists; a CRD's `x-kubernetes-list-type`), and whether an object
is atomic (a `LabelSelector`, a `+mapType=atomic` map). Without a schema every object is a map and
every list atomic, as structured-merge-diff's deduced schema.

`field_set` is structured-merge-diff's `ToFieldSet` (the fields an applied configuration sets: its
leaves, list elements and map entries); `compare` its `Compare` (added, modified and removed paths of
an update). Pure functions; called by `managedfields.py` and `apply.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from runtimekit.cluster.apiserver import crschema
from runtimekit.cluster.apiserver.openapi import Kind, Shape
from runtimekit.cluster.apiserver.patchschema import MergeList, Node, Struct
from runtimekit.kube.objects import JsonObject

Path = tuple[str, ...]
FieldSet = set[Path]

# Go structs marked `+structType=atomic`: one owner sets them whole (`f:selector: {}`)
ATOMIC_STRUCTS = frozenset(
    {
        "LabelSelector",
        "LocalObjectReference",
        "ObjectReference",
        "TypedLocalObjectReference",
        "ConfigMapKeySelector",
        "SecretKeySelector",
        "ObjectFieldSelector",
        "ResourceFieldSelector",
        "NodeSelector",
        "NodeSelectorTerm",
    }
)
_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}
_SCALARS = frozenset({str, int, float, bool, type(None)})
_PLAIN = re.compile(r'[^"\\\x00-\x1f\x7f]*')  # a string JSON writes as it is, between quotes


class Place:
    """One place of an object and what its schema says of it (any of the three may be unknown).

    Built once per kind (`operations.Api.writer` keeps the roots) and read on every write: what a
    place says is worked out when it is made, and its children are made once, when first asked for."""

    __slots__ = ("_children", "_item", "atomic", "crd", "defaults", "keys", "shape", "strategy", "struct")

    def __init__(self, shape: Shape | None = None, strategy: Node | None = None, crd: crschema.Node | None = None):
        self.shape, self.strategy, self.crd = shape, strategy, crd
        self._children: dict[str, Place] = {}
        self._item: Place | None = None
        self.struct = shape.kind is Kind.STRUCT if shape is not None else crd is not None and bool(crd.properties)
        self.atomic = (
            (isinstance(strategy, Struct) and strategy.atomic)
            or (shape is not None and shape.struct in ATOMIC_STRUCTS)
            or (crd is not None and crd.map_type == "atomic")
        )
        keys: tuple[str, ...] | None = None
        if isinstance(strategy, MergeList):
            keys = strategy.map_keys
        elif crd is not None and crd.list_type == "map":
            keys = crd.list_keys
        elif crd is not None and crd.list_type == "set":
            keys = ()
        self.keys = keys  # None: an atomic list; (): a set; else the keys of a list merged as a map
        self.defaults = dict(strategy.defaults) if isinstance(strategy, MergeList) else {}

    def declared(self, key: str) -> bool:
        """A field the schema names (kept apart from a map's free keys, which are always owned)."""
        if self.shape is not None and self.shape.kind is Kind.STRUCT:
            return key in self.shape.fields
        if self.crd is not None:
            return key in self.crd.properties
        return False

    def child(self, key: str) -> Place:
        found = self._children.get(key)
        if found is not None:
            return found
        shape = self.shape
        sub_shape = None
        if shape is not None:
            sub_shape = shape.fields.get(key) if shape.kind is Kind.STRUCT else shape.item
        strategy = self.strategy.fields.get(key) if isinstance(self.strategy, Struct) else None
        crd = self.crd
        sub_crd = None if crd is None else crd.properties.get(key) or crd.additional
        found = self._children[key] = Place(sub_shape, strategy, sub_crd)
        return found

    def item(self) -> Place:
        if self._item is None:
            self._item = Place(
                self.shape.item if self.shape is not None else None,
                self.strategy.item if isinstance(self.strategy, MergeList) else None,
                self.crd.items if self.crd is not None else None,
            )
        return self._item

    def list_keys(self) -> tuple[str, ...] | None:
        """None for an atomic list, () for a set, the keys of a list merged as a map."""
        return self.keys

    def atomic_object(self) -> bool:
        return self.atomic


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def item_element(item: Any, keys: tuple[str, ...], place: Place) -> str:
    """The path element of one element of the granular list at `place` (`k:{...}` in a map list, a key
    an element omits read as its default; `v:...` in a set)."""
    if not keys:
        return "v:" + _dumps(item)
    found = item if isinstance(item, dict) else {}
    if len(keys) == 1 and keys[0] in found:
        value = found[keys[0]]
        plain = isinstance(value, str) and _PLAIN.fullmatch(value) is not None
        text = '"' + value + '"' if plain else _dumps(value)
        return 'k:{"' + keys[0] + '":' + text + "}"  # the common case (a name), without building a dict
    if place.defaults:
        found = {**place.defaults, **found}
    return "k:" + _dumps({k: found[k] for k in keys if k in found})


def field_set(value: Any, place: Place, path: Path = (), out: FieldSet | None = None) -> FieldSet:
    """ToFieldSet: the paths of every leaf, list element and map entry of `value`."""
    out = set() if out is None else out
    if isinstance(value, dict):
        if place.atomic_object():
            if path:
                out.add(path)
            return out
        for key, child in value.items():
            sub = (*path, "f:" + key)
            field_set(child, place.child(key), sub, out)
            if child is None or (isinstance(child, dict) and not child) or not place.declared(key):
                out.add(sub)
    elif isinstance(value, list):
        keys = place.list_keys()
        if keys is None:
            out.add(path)
            return out
        item_place = place.item()
        for item in value:
            sub = (*path, item_element(item, keys, place))
            if keys:
                field_set(item, item_place, sub, out)
            out.add(sub)
    elif path:
        out.add(path)
    return out


@dataclass
class Comparison:
    """What an update changed, as paths (Compare's Added, Modified and Removed)."""

    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    def changed(self) -> FieldSet:
        return self.added | self.modified

    def empty(self) -> bool:
        return not (self.added or self.modified or self.removed)


def compare(old: Any, new: Any, place: Place) -> Comparison:
    """The paths `new` adds, modifies and removes relative to `old` (both objects of one kind)."""
    found = Comparison(set(), set(), set())
    _compare(old, new, place, (), found)
    return found


def _compare(old: Any, new: Any, place: Place, path: Path, out: Comparison) -> None:
    if old == new and type(old) is type(new):
        return
    if isinstance(old, dict) and isinstance(new, dict) and not place.atomic_object():
        for key, value in new.items():
            sub = (*path, "f:" + key)
            if key in old:
                _compare(old[key], value, place.child(key), sub, out)
            else:
                _subtree(value, place.child(key), sub, out.added)
        for key, value in old.items():
            if key not in new:
                _subtree(value, place.child(key), (*path, "f:" + key), out.removed)
        return
    keys = place.list_keys() if isinstance(old, list) and isinstance(new, list) else None
    if keys is None or not isinstance(old, list) or not isinstance(new, list):
        if path:
            out.modified.add(path)
        return
    item_place = place.item()
    before = {item_element(item, keys, place): item for item in old}
    after = {item_element(item, keys, place): item for item in new}
    for element, item in after.items():
        sub = (*path, element)
        if element in before:
            if keys:
                _compare(before[element], item, item_place, sub, out)
        else:
            _subtree(item, item_place, sub, out.added)
            out.added.add(sub)  # an element is a member, whatever it holds
    for element, item in before.items():
        if element not in after:
            _subtree(item, item_place, (*path, element), out.removed)
            out.removed.add((*path, element))


def _subtree(value: Any, place: Place, path: Path, out: FieldSet) -> None:
    """A part of the object that appeared (or went): every path in it, the part itself included unless
    it is a struct (Go's non-pointer structs are never absent, so structured-merge-diff never sees one
    come) or a list (the same holds for the lists kube always serializes, such as `containers`)."""
    if isinstance(value, dict) and value and not place.atomic_object():
        if not _is_struct(place):
            out.add(path)
        for key, child in value.items():
            _subtree(child, place.child(key), (*path, "f:" + key), out)
        return
    keys = place.list_keys() if isinstance(value, list) and value else None
    if keys is None or not isinstance(value, list):
        out.add(path)
        return
    item_place = place.item()
    for item in value:
        sub = (*path, item_element(item, keys, place))
        out.add(sub)
        if keys and isinstance(item, dict):
            for key, child in item.items():
                _subtree(child, item_place.child(key), (*sub, "f:" + key), out)


def _is_struct(place: Place) -> bool:
    return place.struct


def added_tree(value: JsonObject, place: Place) -> JsonObject:
    """`encode(compare({}, value, place).added)` built directly: what the creator of an object owns
    (every create pays for it, so it makes the tree without the paths in between)."""
    return _tree(value, place, False)


def _tree(value: Any, place: Place, member: bool) -> JsonObject:
    """The fieldsV1 node of a part that appeared, `.` first when the part is a member (`_subtree`)."""
    if isinstance(value, dict) and value and not place.atomic:
        return _fields(value, place, member and not place.struct)
    keys = place.keys if isinstance(value, list) and value else None
    if keys is None:
        return {}
    items: JsonObject = {}
    item_place = place.item()
    for item in value:
        keyed = keys and isinstance(item, dict) and item
        items[item_element(item, keys, place)] = _fields(item, item_place, True) if keyed else {}
    return {element: items[element] for element in sorted(items)}


def _fields(value: JsonObject, place: Place, member: bool) -> JsonObject:
    node: JsonObject = {".": {}} if member else {}
    for key in sorted(value):
        child = value[key]
        kind = child.__class__
        if kind in _SCALARS or not child:  # most of an object: a leaf, without a look at the schema
            node["f:" + key] = {}
        elif kind is dict:
            sub = place.child(key)
            node["f:" + key] = {} if sub.atomic else _fields(child, sub, not sub.struct)
        else:
            node["f:" + key] = _tree(child, place.child(key), True)
    return node


# fieldsV1 ---------------------------------------------------------------------------------------


def encode(paths: Iterable[Path]) -> JsonObject:
    """The fieldsV1 tree of a set: `{"f:spec": {"f:replicas": {}}}`, `.` on members with children."""
    root: JsonObject = {}
    members: list[JsonObject] = []
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.append(node)
    for node in members:
        if node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: JsonObject) -> JsonObject:
    return {key: _sorted(node[key]) for key in sorted(node, key=_order)}


def _order(element: str) -> tuple[int, str]:
    return (-1, "") if element == "." else (_RANK.get(element[:1], 4), element[2:])


def decode(tree: Any) -> FieldSet:
    """The set a fieldsV1 tree holds (a malformed tree raises ValueError)."""
    if not isinstance(tree, dict):
        raise ValueError("fieldsV1 must be an object")
    out: FieldSet = set()
    _decode(tree, (), out)
    return out


def _decode(node: JsonObject, path: Path, out: FieldSet) -> None:
    for element, child in node.items():
        if element == ".":
            continue
        if not isinstance(child, dict) or element[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"invalid fieldsV1 element {element!r}")
        sub = (*path, element)
        if not child or "." in child:
            out.add(sub)
        _decode(child, sub, out)


# paths as conflicts name them ---------------------------------------------------------------------


def render(path: Path) -> str:
    """`.spec.template.spec.containers[name="nginx"].image`, as structured-merge-diff prints a path."""
    return "".join(_render_element(element) for element in path)


def _render_element(element: str) -> str:
    kind, text = element[:1], element[2:]
    if kind == "f":
        return "." + text
    if kind == "v":
        return "[=" + text + "]"
    if kind == "i":
        return "[" + text + "]"
    try:
        keys = json.loads(text)
    except ValueError:
        return "[" + text + "]"
    return "[" + ",".join(f"{k}={_dumps(v)}" for k, v in keys.items()) + "]"


def with_prefix(paths: FieldSet, prefix: Path) -> Iterator[Path]:
    size = len(prefix)
    return (path for path in paths if path[:size] == prefix)
