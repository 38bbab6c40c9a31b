"""Conversion between a bucket's stored form and the other versions that serve it.

Three cases exist: the versions of a CustomResourceDefinition (conversion strategy `None`: only
`apiVersion` changes), `events.k8s.io/v1` Events, which share storage with core/v1 Events and
rename fields (`involvedObject` <-> `regarding`, `message` <-> `note`, ...), and
`resource.k8s.io/v1beta1`, whose requests and devices nest differently from the stored v1
(`draconversion`). `served_bytes` caches the
converted encoding on the stored version, so a watch or list converts each version once.
Pure functions; called by `operations.py` and the HTTP layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.cluster.apiserver import draconversion
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import Stored, dumps
from runtimekit.kube.objects import JsonObject

EVENTS_V1 = "events.k8s.io/v1"

# core/v1 Event field -> events.k8s.io/v1 Event field
_EVENT_FIELDS = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("reason", "reason"),
    ("related", "related"),
    ("type", "type"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)


def _event_to_v1(core: JsonObject) -> JsonObject:
    out: JsonObject = {"kind": "Event", "apiVersion": EVENTS_V1, "metadata": core.get("metadata", {})}
    for old, new in _EVENT_FIELDS:
        if core.get(old) not in (None, "", {}):
            out[new] = core[old]
    series = core.get("series")
    if isinstance(series, Mapping):
        out["series"] = {"count": series.get("count", 0), "lastObservedTime": series.get("lastObservedTime")}
    return out


def _event_from_v1(event: JsonObject) -> JsonObject:
    out: JsonObject = {"kind": "Event", "apiVersion": "v1", "metadata": event.get("metadata", {})}
    for old, new in _EVENT_FIELDS:
        if event.get(new) not in (None, ""):
            out[old] = event[new]
    out.setdefault("involvedObject", {})
    series = event.get("series")
    if isinstance(series, Mapping):
        out["series"] = {"count": series.get("count", 0), "lastObservedTime": series.get("lastObservedTime")}
    return out


def to_served(info: ResourceInfo, stored_obj: JsonObject) -> JsonObject:
    """The stored form of an object as `info` serves it."""
    if info.view == EVENTS_V1:
        return _event_to_v1(stored_obj)
    if info.view == draconversion.V1BETA1:
        return draconversion.to_v1beta1(stored_obj)
    stored_obj["apiVersion"] = info.api_version
    return stored_obj


def to_stored(info: ResourceInfo, storage: ResourceInfo, obj: JsonObject) -> JsonObject:
    """An object written through `info` in the form its bucket stores."""
    if info.view == EVENTS_V1:
        return _event_from_v1(obj)
    if info.view == draconversion.V1BETA1:
        return draconversion.to_v1(obj)
    obj["apiVersion"] = storage.api_version
    return obj


def needs_conversion(info: ResourceInfo, storage: ResourceInfo) -> bool:
    return bool(info.view) or info.api_version != storage.api_version


def served_bytes(info: ResourceInfo, storage: ResourceInfo, stored: Stored) -> bytes:
    """The JSON of `stored` as `info` serves it, converted at most once per version and view."""
    if not needs_conversion(info, storage):
        return stored.raw
    cached = stored.views.get(info.api_version)
    if cached is None:
        cached = stored.views[info.api_version] = dumps(to_served(info, stored.obj()))
    return cached
