"""Server-side apply: an applied configuration merged into the live object, as structured-merge-diff's Apply.

`apply(live, config, writer, force, now)` returns the object to store, its managedFields set:
- the configuration merges into the live object: objects field by field, lists by their schema
  (`x-kubernetes-list-type`: a `map` list element by element matched on its keys, a `set` by value,
  an atomic list and atomic objects replaced whole); a field the configuration gives as `null` goes;
- the manager's `Apply` entry becomes exactly the fields the configuration sets; a field it applied
  before and applies no more is removed from the object unless another manager owns it (or a part
  of it), so re-applying a subset removes what the manager dropped;
- a change to a field another manager owns is a conflict: 409 listing every field and its manager
  (kube's wording), unless `force` (kubectl `--force-conflicts`) moves those fields to the applier;
  setting a field to the value it already has is no conflict and shares it;
- an object without managedFields gets a `before-first-apply` entry owning what it holds first;
- kubectl's migration from client-side apply: for the manager `kubectl`, fields the
  `kubectl.kubernetes.io/last-applied-configuration` annotation holds with the live value are taken
  without a conflict, and that annotation, when present, is rewritten to the new configuration.
Pure functions over JSON objects; called by `applying.py`.
"""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.fieldpaths import (
    FieldSet,
    Path,
    Place,
    compare,
    field_set,
    item_element,
    render,
)
from runtimekit.cluster.apiserver.managedfields import (
    APPLY,
    UPDATE,
    Entry,
    Writer,
    encode_entries,
    live_entries,
    view,
)
from runtimekit.kube.objects import JsonObject, StatusCause

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MIGRATING = "kubectl"
_Conflicts = list[tuple[Entry, Path]]


def owned(obj: JsonObject, writer: Writer) -> FieldSet:
    """The fields a write by `writer` of `obj` would own (ToFieldSet over its part of the object)."""
    return field_set(view(obj, writer), writer.place)


def apply(live: JsonObject | None, config: JsonObject, writer: Writer, force: bool, now: str) -> JsonObject:
    entries = live_entries(live)
    if live is not None and not entries:
        first = compare({}, view(live, writer), writer.place).added  # as an update that created it
        entries = [Entry("before-first-apply", UPDATE, writer.api_version, now, "", first)] if first else []
    applied = view(config, writer)
    new_set = field_set(applied, writer.place)
    mine = Entry(writer.manager, APPLY, writer.api_version, now, writer.subresource, new_set)
    last: FieldSet = set()
    others: list[Entry] = []
    for entry in entries:
        if entry.ident() == mine.ident():
            last, mine.time = entry.fields, entry.time
        else:
            others.append(entry)
    base: JsonObject = live if live is not None else {}
    merged = cast(JsonObject, merge(base, _scoped(config, writer), writer.place))
    stale = last - new_set
    if stale:
        merged = copy.deepcopy(merged)  # it shares parts with the live object, and removal works in place
        keep = new_set.union(*(e.fields for e in others))
        prefixes = {path[:i] for path in keep for i in range(1, len(path) + 1)}
        _remove(merged, {p for p in stale if p not in prefixes}, writer.place)
    changes = compare(view(live, writer), view(merged, writer), writer.place)
    changed = changes.changed()
    conflicts: _Conflicts = [(e, p) for e in others for p in sorted(e.fields & changed)]
    if conflicts and not force and not _migrating(live, writer, conflicts):
        raise conflict_error(conflicts)
    for entry in others:
        entry.fields -= changed
        entry.fields -= changes.removed
    if not changes.empty() or not mine.time:
        mine.time = now
    annotations = merged["metadata"].get("annotations") or {}
    if live is not None and writer.manager == _MIGRATING and LAST_APPLIED in annotations:
        merged["metadata"]["annotations"] = {**annotations, LAST_APPLIED: _last_applied(config)}
    encoded = encode_entries([mine, *others])
    if encoded:
        merged["metadata"]["managedFields"] = encoded
    else:
        merged["metadata"].pop("managedFields", None)
    return merged


def _scoped(config: JsonObject, writer: Writer) -> JsonObject:
    """What of the configuration a write through `writer` applies (kube resets the rest)."""
    if writer.subresource == "status":
        return {k: v for k, v in config.items() if k in ("apiVersion", "kind", "metadata", "status")}
    if writer.has_status:
        return {k: v for k, v in config.items() if k != "status"}
    return config


def _last_applied(config: JsonObject) -> str:
    copied: JsonObject = json.loads(json.dumps(config))
    annotations = copied.get("metadata", {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return json.dumps(copied, separators=(",", ":"), sort_keys=True) + "\n"  # as Go encodes it


def _migrating(live: JsonObject | None, writer: Writer, conflicts: _Conflicts) -> bool:
    """kubectl's own server-side apply may take what its last client-side apply set, unchanged since."""
    if live is None or writer.manager != _MIGRATING:
        return False
    text = (live["metadata"].get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return False
    try:
        last = json.loads(text)
    except ValueError:
        return False
    if not isinstance(last, dict):
        return False
    allowed = owned(last, writer) - compare(view(last, writer), view(live, writer), writer.place).modified
    return all(path in allowed for _, path in conflicts)


def conflict_error(conflicts: _Conflicts) -> ApiError:
    """409 as kube-apiserver words it (`Apply failed with 1 conflict: conflict with "x" using v1: .spec.a`)."""
    causes: list[StatusCause] = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {_manager(e)}", "field": render(p)}
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_manager(entry)}: {render(path)}"
    else:
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_manager(entry), []).append(render(path))
        lines = []
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines.extend(f"- {path}" for path in by_manager[name])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def _manager(entry: Entry) -> str:
    text = json.dumps(entry.manager)
    if entry.subresource:
        text += f" with subresource {json.dumps(entry.subresource)}"
    if entry.operation == UPDATE:
        text += f" using {entry.api_version}"
    return text


# merge and removal -------------------------------------------------------------------------------


def merge(live: Any, config: Any, place: Place) -> Any:
    """The configuration merged into the live value (a `null` in the configuration removes the field)."""
    if isinstance(live, dict) and isinstance(config, dict) and not place.atomic_object():
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(live.get(key), value, place.child(key)) if key in live else _plain(value)
        return out
    if isinstance(live, list) and isinstance(config, list):
        keys = place.list_keys()
        if keys is not None:
            return _merge_list(live, config, keys, place)
    return _plain(config)


def _plain(value: Any) -> Any:
    """A configured value stored as given, less its nulls (Go leaves an absent field)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _merge_list(live: list[Any], config: list[Any], keys: tuple[str, ...], place: Place) -> list[Any]:
    """Elements matched by key (or value): the configuration's in its order, the others where they were."""
    item_place = place.item()
    live_ids = [item_element(item, keys, place) for item in live]
    config_ids = [item_element(item, keys, place) for item in config]
    by_live = dict(zip(live_ids, live, strict=True))
    by_config = dict(zip(config_ids, config, strict=True))
    out: list[Any] = []
    done: set[str] = set()
    pending = iter(config_ids)

    def emit(ident: str) -> None:
        done.add(ident)
        wanted = by_config[ident]
        out.append(merge(by_live[ident], wanted, item_place) if ident in by_live and keys else _plain(wanted))

    for ident, item in zip(live_ids, live, strict=True):
        if ident not in by_config:
            out.append(item)
            continue
        if ident in done:
            continue
        for upcoming in pending:
            if upcoming not in done:
                emit(upcoming)
            if upcoming == ident:
                break
    for upcoming in pending:
        if upcoming not in done:
            emit(upcoming)
    return out


def _remove(obj: Any, paths: FieldSet, place: Place) -> None:
    """Remove each path (a field, a map entry, a list element) from `obj`, in place; an object or
    list left empty by a removal goes too."""
    if not paths:
        return
    tree: JsonObject = {}
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        node[""] = True  # this path itself goes
    _remove_tree(obj, tree, place)


def _remove_tree(value: Any, tree: JsonObject, place: Place) -> None:
    if isinstance(value, dict):
        for element, sub in tree.items():
            key = element[2:]
            if element[:2] != "f:" or key not in value:
                continue
            if "" in sub:
                del value[key]
                continue
            child = value[key]
            _remove_tree(child, sub, place.child(key))
            if isinstance(child, dict | list) and not child:
                del value[key]
    elif isinstance(value, list):
        keys = place.list_keys()
        if keys is None:
            return
        item_place = place.item()
        kept = []
        for item in value:
            sub = tree.get(item_element(item, keys, place))
            if sub is None:
                kept.append(item)
            elif "" not in sub:
                _remove_tree(item, sub, item_place)
                kept.append(item)
        value[:] = kept
