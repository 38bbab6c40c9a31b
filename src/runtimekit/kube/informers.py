"""Shared informers, each with a cache of the objects it has seen and named indexes over them
(client-go's `SharedIndexInformer` and `Indexer`).

`Informers(http).resource(path)` gives the one `SharedInformer` of a collection path (created on
first use; `resource(path, Pod)` types it): a `runtimekit.kube.informer.Informer` whose events update
an `ObjectCache` and are then handed, as a typed `Change(kind, old, new)`, to every handler
registered with `on(handler)`. Handlers run on the informer's thread and must be quick (update a
dict, queue a key).

`add_indexer(name, fn)` adds an index: `fn` gives the values an object is filed under, and
`by_index(name, value)` the objects filed under `value`. `BY_CONTROLLER` (`controller_uids`) files
objects under their controller's UID, so a controller finds what it owns.

The cache also takes a component's own writes (`written`, `removed`), so a sync that follows at
once sees what it just did, as kube's expectations make sure. Stale versions never overwrite newer
ones: an event or a write whose resourceVersion is older than what the cache holds (or than the
deletion of that UID) is dropped.

Callers: the embedded cluster's controllers; usable by any component that watches the API server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import JsonObject, meta, object_key
from runtimekit.kube.semantics.owners import controller_uid

log = logging.getLogger(__name__)
T = TypeVar("T", bound=Mapping[str, object])
TOMBSTONES = 20_000  # deleted UIDs remembered, so a late event cannot bring an object back
BY_CONTROLLER = "controller-uid"


@dataclass(frozen=True)
class Change(Generic[T]):
    """One change seen by a shared informer: `old` is None for ADDED, `new` is None for DELETED."""

    kind: str
    old: T | None
    new: T | None

    @property
    def obj(self) -> T:
        found = self.new if self.new is not None else self.old
        assert found is not None
        return found


IndexFunc = Callable[[T], Iterable[str]]


def controller_uids(obj: Mapping[str, object]) -> tuple[str, ...]:
    """The index function of `BY_CONTROLLER`: the UID of the object's controller, if it has one."""
    uid = controller_uid(obj)
    return (uid,) if uid else ()


def _rv(obj: Mapping[str, object]) -> int | None:
    try:
        return int(str(meta(obj).get("resourceVersion", "")))
    except ValueError:
        return None


class ObjectCache(Generic[T]):
    """Objects of one collection by `namespace/name`, with named indexes. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, T] = {}
        self._indexers: dict[str, IndexFunc[T]] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}  # index name -> value -> keys
        self._gone: OrderedDict[str, int] = OrderedDict()

    def add_indexer(self, name: str, index: IndexFunc[T]) -> None:
        """Index the objects by `index` under `name`, those already held included. Adding the same
        function under a name again does nothing; another one under a taken name is a ValueError."""
        with self._lock:
            known = self._indexers.get(name)
            if known is not None:
                if known is not index:
                    raise ValueError(f"indexer {name!r} exists already")
                return
            self._indexers[name] = index
            self._indices[name] = {}
            for key, obj in self._objects.items():
                self._file(name, key, obj)

    def by_index(self, name: str, value: str) -> list[T]:
        """The objects the indexer `name` files under `value`; KeyError for an unknown indexer."""
        with self._lock:
            keys = self._indices[name].get(value, ())
            return [self._objects[k] for k in keys if k in self._objects]

    def _file(self, name: str, key: str, obj: T) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            index.setdefault(value, set()).add(key)

    def _unfile(self, key: str, obj: T) -> None:
        for name, index in self._indices.items():
            for value in self._indexers[name](obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _older(self, obj: T, key: str) -> bool:
        rv = _rv(obj)
        if rv is None:
            return False
        known = self._objects.get(key)
        if known is not None and (known_rv := _rv(known)) is not None and rv < known_rv:
            return True
        gone = self._gone.get(str(meta(obj).get("uid", "")))
        return gone is not None and rv <= gone

    def _put(self, key: str, obj: T) -> T | None:
        old = self._objects.get(key)
        if old is not None:
            self._unfile(key, old)
        self._objects[key] = obj
        for name in self._indexers:
            self._file(name, key, obj)
        return old

    def _drop(self, key: str, rv: int | None) -> T | None:
        old = self._objects.pop(key, None)
        if old is None:
            return None
        self._unfile(key, old)
        uid = str(meta(old).get("uid", ""))
        if uid:
            self._gone[uid] = rv if rv is not None else (_rv(old) or 0)
            while len(self._gone) > TOMBSTONES:
                self._gone.popitem(last=False)
        return old

    def apply(self, kind: str, obj: T) -> Change[T] | None:
        """Take an informer event; the change it makes, None when it is stale or changes nothing."""
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                old = self._objects.get(key)
                if old is None:
                    return None
                uid = meta(obj).get("uid")
                if uid and uid != meta(old).get("uid"):
                    return None  # a newer object of that name replaced it already
                return Change("DELETED", self._drop(key, _rv(obj)), None)
            if self._older(obj, key):
                return None
            old = self._put(key, obj)
            return Change("MODIFIED" if old is not None else "ADDED", old, obj)

    def written(self, obj: T) -> None:
        """Record an object as a write of ours returned it (ignored when the cache has a newer one)."""
        self.apply("MODIFIED", obj)

    def removed(self, obj: T) -> None:
        """Record that we deleted this object (the API server's answer, at the deletion's version)."""
        self.apply("DELETED", obj)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._objects.get(key)

    def items(self, namespace: str | None = None) -> list[T]:
        with self._lock:
            objs = list(self._objects.values())
        if namespace is None:
            return objs
        return [o for o in objs if meta(o).get("namespace") == namespace]


class SharedInformer(Generic[T]):
    """An informer feeding a cache and any number of handlers (see the module docstring)."""

    def __init__(
        self, http: KubeHttp, path: str, name: str = "", optional: bool = False, params: Mapping[str, str] | None = None
    ) -> None:
        self.cache: ObjectCache[T] = ObjectCache()
        self.handlers: list[Callable[[Change[T]], None]] = []
        self.informer: Informer[T] = Informer(http, path, self._deliver, params, name=name, optional=optional)

    def on(self, handler: Callable[[Change[T]], None]) -> None:
        self.handlers.append(handler)

    def add_indexer(self, name: str, index: IndexFunc[T]) -> None:
        """See `ObjectCache.add_indexer`."""
        self.cache.add_indexer(name, index)

    def by_index(self, name: str, value: str) -> list[T]:
        return self.cache.by_index(name, value)

    def _deliver(self, kind: str, obj: T) -> None:
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
        self._by_path: dict[str, SharedInformer[Any]] = {}

    @overload
    def resource(self, path: str, *, optional: bool = False) -> SharedInformer[JsonObject]: ...

    @overload
    def resource(self, path: str, kind: type[T], *, optional: bool = False) -> SharedInformer[T]: ...

    def resource(self, path: str, kind: object = None, *, optional: bool = False) -> SharedInformer[Any]:
        """The shared informer of a collection path such as `/apis/apps/v1/replicasets`; `kind` types
        its objects (`resource("/api/v1/pods", Pod)`), as its one informer hands them out."""
        found = self._by_path.get(path)
        if found is None:
            found = self._by_path[path] = SharedInformer(self.http, path, path, optional)
        return found

    @property
    def all(self) -> Iterable[Informer[Any]]:
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
