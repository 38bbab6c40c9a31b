"""`metadata.managedFields`: who owns which fields of an object, kept on every write as kube-apiserver does.

Every create, update and patch (a field manager named by the `fieldManager` query, else by the
User-Agent's program: `manager_name`) records the fields it changed in an `Update` entry of that
manager and takes them from every other manager (`track_update`, structured-merge-diff's Update);
`apply.py` records `Apply` entries. As in kube-apiserver:
- the request's own managedFields are taken when it sends any (kubectl's client-side-apply upgrade
  rewrites them with a JSON patch); `[]` or `[{}]` clears them, and an object without any is not
  tracked again until an apply (kube's skip-non-applied manager);
- an entry is one (manager, operation, subresource) and, for updates, API version; its time is
  set when the manager changed something; entries with no field left go; entries are sorted Apply
  first, then by time; more than `MAX_UPDATE_MANAGERS` update entries fold the oldest into
  `ancient-changes`;
- metadata the server sets (name, namespace, uid, resourceVersion, generation, creationTimestamp...)
  is nobody's, and a write owns only its part: status for `/status`, the rest for the main resource
  of a kind with a status subresource.
Called by `operations.Api` and `apply.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.cluster.apiserver.fieldpaths import FieldSet, Place, added_tree, compare, decode, encode
from runtimekit.kube.objects import JsonObject

APPLY = "Apply"
UPDATE = "Update"
MAX_UPDATE_MANAGERS = 10
_IGNORED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "selfLink",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)
_MAX_MANAGER = 128


@dataclass
class Entry:
    """One decoded managedFields entry."""

    manager: str
    operation: str
    api_version: str
    time: str
    subresource: str
    fields: FieldSet

    def ident(self) -> tuple[str, str, str, str]:
        """kube's manager identifier: appliers keep one entry whatever API version they apply with."""
        return (self.manager, self.operation, self.subresource, "" if self.operation == APPLY else self.api_version)

    def encoded(self, tree: JsonObject | None = None) -> JsonObject:
        out: JsonObject = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = encode(self.fields) if tree is None else tree
        if self.subresource:
            out["subresource"] = self.subresource
        return out


@dataclass(frozen=True)
class Writer:
    """Who writes, and through what: the manager, the version it speaks, the subresource, the kind's shape."""

    manager: str
    api_version: str
    subresource: str
    has_status: bool
    place: Place


def manager_name(query: Mapping[str, str], user_agent: str) -> str:
    """The `fieldManager` query, else the User-Agent's program (`kubectl/v1.31.0 (linux/amd64)` -> kubectl)."""
    given = query.get("fieldManager", "")
    if given:
        return given
    return user_agent.split("/", 1)[0].strip()[:_MAX_MANAGER]


def decode_entries(raw: Any) -> list[Entry] | None:
    """The entries of a managedFields list; None when any is malformed (kube then keeps the live ones)."""
    if not isinstance(raw, list):
        return None
    out: list[Entry] = []
    try:
        for item in raw:
            if not isinstance(item, dict) or item.get("operation") not in (APPLY, UPDATE):
                return None
            if item.get("fieldsType", "FieldsV1") != "FieldsV1":
                return None
            out.append(
                Entry(
                    str(item.get("manager", "")),
                    str(item["operation"]),
                    str(item.get("apiVersion", "")),
                    str(item.get("time", "")),
                    str(item.get("subresource", "")),
                    decode(item.get("fieldsV1") or {}),
                )
            )
    except ValueError:
        return None
    return out


def encode_entries(entries: Iterable[Entry]) -> list[JsonObject]:
    kept = _capped([e for e in entries if e.fields])
    kept.sort(key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    return [e.encoded() for e in kept]


def _capped(entries: list[Entry]) -> list[Entry]:
    updates = sorted((e for e in entries if e.operation == UPDATE), key=lambda e: e.time)
    if len(updates) <= MAX_UPDATE_MANAGERS:
        return entries
    folded = updates[: len(updates) - MAX_UPDATE_MANAGERS + 1]
    fields: FieldSet = set().union(*(e.fields for e in folded))
    ancient = Entry("ancient-changes", UPDATE, folded[-1].api_version, folded[-1].time, "", fields)
    gone = {id(e) for e in folded}
    return [e for e in entries if id(e) not in gone] + [ancient]


def is_reset(raw: Any) -> bool:
    """`managedFields: []` or `[{}]`: the request clears them."""
    return isinstance(raw, list) and (not raw or (len(raw) == 1 and raw[0] == {}))


def view(obj: JsonObject | None, writer: Writer) -> JsonObject:
    """The part of an object a write by `writer` may own (a shallow copy)."""
    if obj is None:
        return {}
    if writer.subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    if writer.has_status:
        out.pop("status", None)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _IGNORED_META}
        if kept:
            out["metadata"] = kept
    return out


def live_entries(obj: JsonObject | None) -> list[Entry]:
    if obj is None:
        return []
    return decode_entries(obj.get("metadata", {}).get("managedFields")) or []


def track_update(old: JsonObject | None, new: JsonObject, writer: Writer, now: str) -> None:
    """Set `new`'s managedFields after an update of `old` (a create when None) by `writer`.

    Every write pays for this, so entries stay as they are stored unless the write changed one of
    their fields: only the writer's own entry and those it takes fields from are decoded again."""
    meta = new["metadata"]
    given = meta.get("managedFields")
    old_raw = None if old is None else old["metadata"].get("managedFields")
    raw: list[JsonObject] | None = None
    if not is_reset(given):
        raw = given if given and _well_formed(given) else old_raw if _well_formed(old_raw) else None
    if not raw:
        meta.pop("managedFields", None)
        if old is None:  # a create: the creator owns what it made; an update of an untracked object is not
            tree = added_tree(view(new, writer), writer.place)
            if tree:
                mine = Entry(writer.manager, UPDATE, writer.api_version, now, writer.subresource, set())
                meta["managedFields"] = [mine.encoded(tree)]
        return
    changes = compare(view(old, writer), view(new, writer), writer.place)
    if changes.empty():
        meta["managedFields"] = raw
        return
    changed = changes.changed()
    gone = changed | changes.removed
    mine = Entry(writer.manager, UPDATE, writer.api_version, now, writer.subresource, set())
    kept: list[JsonObject] = []
    for item in raw:
        tree = item.get("fieldsV1") or {}
        if _ident_of(item) == mine.ident():
            mine.fields = _decoded(tree)
        elif _touches(tree, gone):
            left = _decoded(tree) - gone
            if left:
                kept.append({**item, "fieldsV1": encode(left)})
        else:
            kept.append(item)
    mine.fields = (mine.fields - changes.removed) | changed
    entries = [*kept, mine.encoded()]
    if sum(1 for e in entries if e.get("operation") == UPDATE) > MAX_UPDATE_MANAGERS:
        meta["managedFields"] = encode_entries(decode_entries(entries) or [])
        return
    entries.sort(key=_entry_order)
    meta["managedFields"] = entries


def _well_formed(raw: Any) -> bool:
    """A managedFields list whose entries can be read (their fieldsV1 are read when needed)."""
    return isinstance(raw, list) and all(
        isinstance(item, dict)
        and item.get("operation") in (APPLY, UPDATE)
        and item.get("fieldsType", "FieldsV1") == "FieldsV1"
        and isinstance(item.get("fieldsV1", {}), dict)
        for item in raw
    )


def _ident_of(item: JsonObject) -> tuple[str, str, str, str]:
    operation = str(item.get("operation"))
    version = "" if operation == APPLY else str(item.get("apiVersion", ""))
    return (str(item.get("manager", "")), operation, str(item.get("subresource", "")), version)


def _entry_order(item: JsonObject) -> tuple[str, str, str, str, str]:
    get = item.get
    return (
        str(get("operation")),
        str(get("time", "")),
        str(get("manager")),
        str(get("apiVersion")),
        str(get("subresource", "")),
    )


def _decoded(tree: Any) -> FieldSet:
    try:
        return decode(tree)
    except ValueError:
        return set()


def _touches(tree: JsonObject, paths: FieldSet) -> bool:
    """Whether the fieldsV1 `tree` holds any of `paths`, without decoding it."""
    for path in paths:
        node: Any = tree
        for element in path:
            node = node.get(element)
            if node is None:
                break
        else:
            return True
    return False
