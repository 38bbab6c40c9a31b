"""Informers shared by the controllers, each with a cache of the objects it has seen.

`Informers(http).resource(path)` gives the one `SharedInformer` of a collection path (created on
first use): a `runtimekit.kube.informer.Informer` whose events update an `ObjectCache` and are then
handed, as a `Change(kind, old, new)`, to every handler registered with `on(handler)`. Handlers run
on the informer's thread and must be quick (update a dict, queue a key).

The cache also takes a controller's own writes (`written`, `removed`), so a sync that follows at
once sees what it just did, as kube's expectations make sure. Stale versions never overwrite newer
ones: an event or a write whose resourceVersion is older than what the cache holds (or than the
deletion of that UID) is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer, object_key
from runtimekit.kube.objects import JsonObject

log = logging.getLogger(__name__)
TOMBSTONES = 20_000  # deleted UIDs remembered, so a late event cannot bring an object back


@dataclass(frozen=True)
class Change:
    """One change seen by a shared informer: `old` is None for ADDED, `new` is None for DELETED."""

    kind: str
    old: JsonObject | None
    new: JsonObject | None

    @property
    def obj(self) -> JsonObject:
        found = self.new if self.new is not None else self.old
        assert found is not None
        return found


Handler = Callable[[Change], None]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _rv(obj: Mapping[str, Any]) -> int | None:
    try:
        return int(str(_meta(obj).get("resourceVersion", "")))
    except ValueError:
        return None


def controller_uid(obj: Mapping[str, Any]) -> str:
    """The UID of the owner reference marked `controller: true`, else ""."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


class ObjectCache:
    """Objects of one collection by `namespace/name`, with an index by controlling owner UID. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, JsonObject] = {}
        self._owned: dict[str, set[str]] = {}
        self._gone: OrderedDict[str, int] = OrderedDict()

    def _older(self, obj: Mapping[str, Any], key: str) -> bool:
        rv = _rv(obj)
        if rv is None:
            return False
        known = self._objects.get(key)
        if known is not None and (known_rv := _rv(known)) is not None and rv < known_rv:
            return True
        gone = self._gone.get(str(_meta(obj).get("uid", "")))
        return gone is not None and rv <= gone

    def _put(self, key: str, obj: JsonObject) -> JsonObject | None:
        old = self._objects.get(key)
        if old is not None:
            self._owned.get(controller_uid(old), set()).discard(key)
        self._objects[key] = obj
        owner = controller_uid(obj)
        if owner:
            self._owned.setdefault(owner, set()).add(key)
        return old

    def _drop(self, key: str, rv: int | None) -> JsonObject | None:
        old = self._objects.pop(key, None)
        if old is None:
            return None
        self._owned.get(controller_uid(old), set()).discard(key)
        uid = str(_meta(old).get("uid", ""))
        if uid:
            self._gone[uid] = rv if rv is not None else (_rv(old) or 0)
            while len(self._gone) > TOMBSTONES:
                self._gone.popitem(last=False)
        return old

    def apply(self, kind: str, obj: JsonObject) -> Change | None:
        """Take an informer event; the change it makes, None when it is stale or changes nothing."""
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                old = self._objects.get(key)
                if old is None:
                    return None
                uid = _meta(obj).get("uid")
                if uid and uid != _meta(old).get("uid"):
                    return None  # a newer object of that name replaced it already
                return Change("DELETED", self._drop(key, _rv(obj)), None)
            if self._older(obj, key):
                return None
            old = self._put(key, obj)
            return Change("MODIFIED" if old is not None else "ADDED", old, obj)

    def written(self, obj: JsonObject) -> None:
        """Record an object as a write of ours returned it (ignored when the cache has a newer one)."""
        self.apply("MODIFIED", obj)

    def removed(self, obj: JsonObject) -> None:
        """Record that we deleted this object (the API server's answer, at the deletion's version)."""
        self.apply("DELETED", obj)

    def get(self, key: str) -> JsonObject | None:
        with self._lock:
            return self._objects.get(key)

    def items(self, namespace: str | None = None) -> list[JsonObject]:
        with self._lock:
            objs = list(self._objects.values())
        if namespace is None:
            return objs
        return [o for o in objs if _meta(o).get("namespace") == namespace]

    def owned(self, owner_uid: str) -> list[JsonObject]:
        """The objects whose controlling owner reference has this UID."""
        with self._lock:
            return [self._objects[k] for k in self._owned.get(owner_uid, ()) if k in self._objects]


class SharedInformer:
    """An informer feeding a cache and any number of handlers (see the module docstring)."""

    def __init__(self, http: KubeHttp, path: str, name: str, optional: bool = False) -> None:
        self.cache = ObjectCache()
        self.handlers: list[Handler] = []
        self.informer = Informer(http, path, self._deliver, name=name, optional=optional)

    def on(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def _deliver(self, kind: str, obj: JsonObject) -> None:
        change = self.cache.apply(kind, obj)
        if change is None:
            return
        for handler in self.handlers:
            try:
                handler(change)
            except Exception:
                log.exception("%s: a handler failed on %s", self.informer.name, object_key(change.obj))


class Informers:
    """The shared informers of one API server, by collection path."""

    def __init__(self, http: KubeHttp) -> None:
        self.http = http
        self._by_path: dict[str, SharedInformer] = {}

    def resource(self, path: str, optional: bool = False) -> SharedInformer:
        """The shared informer of a collection path such as `/apis/apps/v1/replicasets`."""
        found = self._by_path.get(path)
        if found is None:
            found = self._by_path[path] = SharedInformer(self.http, path, path, optional)
        return found

    @property
    def all(self) -> Iterable[Informer]:
        return [shared.informer for shared in self._by_path.values()]

    def start(self) -> Informers:
        for informer in self.all:
            informer.start()
        return self

    def synced(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.all)

    def stop(self, timeout_s: float = 1.0) -> None:
        for informer in self.all:
            informer.stop(0)
        deadline = time.monotonic() + timeout_s
        for informer in self.all:
            informer.stop(max(0.0, deadline - time.monotonic()))
