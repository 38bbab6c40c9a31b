"""Object storage: buckets of serialised objects, the global resourceVersion and the event history.

Every object version is serialised once, when it is written: `Stored.raw` is the JSON served by get,
list and watch, shared by every reader (a list is the stored bytes joined; a watch event is a prefix,
the bytes and a suffix). Each write takes the next global resourceVersion and appends exactly one
event to a bounded ring, so resourceVersion N is the N-th event: a watch resumes by reading the ring
from its cursor, and a continue token can be served from a consistent snapshot by rolling the
events since its resourceVersion back. Older resourceVersions raise `errors.expired` (410).

Semantics (validation, defaults, finalizers) live in `operations.py`; this module only stores,
indexes (by namespace through key order, and by a few selectable fields such as `spec.nodeName`)
and notifies. It is thread-safe (one re-entrant lock); callers that read-check-write hold `lock`.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from runtimekit.cluster.apiserver.errors import ApiError, expired, too_old_resource_version
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.selectors import field_values
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import JsonObject, ObjectMeta

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects
RowFacts = tuple[tuple[object, ...], object]
"""A version's table row as far as it is fixed: (cells after NAME, with `Since` markers for ages;
what the row adds elsewhere, such as a pod's `tables.PodGpu`, else None)."""
INDEXED_FIELDS = frozenset({"spec.nodeName", "involvedObject.name"})

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
DEFAULT_HISTORY_BYTES = 128 * 2**20
# what an event costs beyond the bytes of its versions: the Event and Stored objects, their dicts
_EVENT_OVERHEAD = 512
# etcd's default --max-request-bytes: kube-apiserver's write of a bigger object fails there, and it
# answers 500 "etcdserver: request is too large" (it does not map that error to a 4xx)
MAX_OBJECT_BYTES = 1536 * 1024


def dumps(obj: Any) -> bytes:
    """The one JSON encoding the server uses for objects it stores and serves."""
    return jsoncodec.dumps(obj)


@dataclass(slots=True, eq=False)
class Stored:
    """One version of one object. Immutable once stored, except the cache of converted views."""

    namespace: str
    name: str
    rv: int
    raw: bytes
    labels: Mapping[str, str]
    fields: Mapping[str, str]
    info: ResourceInfo  # the storage resource it was written as
    facts: RowFacts | None = None  # table cells, computed on first use (`Store.facts`)
    views: dict[str, bytes] = field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    def obj(self) -> JsonObject:
        """A fresh, mutable copy of the object."""
        value: JsonObject = jsoncodec.loads(self.raw)
        return value


class Facts(Protocol):
    """Per-version values computed once, on first use, for tables (see `tables.TableMaker.facts`)."""

    def __call__(self, info: ResourceInfo, obj: JsonObject) -> RowFacts: ...


class Persistence(Protocol):
    """Durable storage of the current objects (`persist.SqlitePersistence`)."""

    def put(self, storage: str, key: Key, raw: bytes, rv: int) -> None: ...

    def delete(self, storage: str, key: Key, rv: int) -> None: ...


class Event:
    """One change: `new` is the version written (for DELETED, the last state at the deletion's RV),
    `old` the version before it (None for ADDED). `cache` holds versions derived from it on demand
    (`watch`: the old object at this RV), `lines` the watch lines rendered from it, shared by every
    watcher that sends the same form (`Store.share_line`). `size` is what the history counts for its
    versions (those only it keeps: a DELETED event keeps the deleted object too), `lines_size` what
    it counts for its lines."""

    __slots__ = ("cache", "lines", "lines_size", "new", "old", "rv", "size", "storage", "type")

    def __init__(self, rv: int, storage: str, type_: str, new: Stored, old: Stored | None) -> None:
        self.rv = rv
        self.storage = storage
        self.type = type_
        self.new = new
        self.old = old
        self.cache: dict[str, Stored] = {}
        self.lines: dict[str, bytes] = {}
        self.lines_size = 0
        kept_old = len(old.raw) if type_ == DELETED and old is not None else 0
        self.size = _EVENT_OVERHEAD + len(new.raw) + kept_old


class History:
    """The last events, indexed by resourceVersion (consecutive, one event per RV): at most `size`
    events and at most `max_bytes` of their sizes and lines (the newest event is always kept). Lines
    are a cache: over the byte bound, the lines cached first are forgotten before any event is."""

    def __init__(self, size: int, first_rv: int, max_bytes: int = DEFAULT_HISTORY_BYTES) -> None:
        if size < 1:
            raise ValueError(f"history size must be at least 1, got {size}")
        if max_bytes < 1:
            raise ValueError(f"history bytes must be at least 1, got {max_bytes}")
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0  # the sizes and lines of the events kept
        self._ring: list[Event | None] = [None] * size
        self.first = first_rv  # the first RV this process records (older ones are gone after a restart)
        self.last = first_rv - 1
        self._oldest = first_rv
        self._lined: deque[int] = deque()  # RVs of events that hold lines, in the order they got them
        self._dropped: dict[str, int] = {}  # per storage key, the RV of its newest event no longer kept

    def append(self, event: Event) -> None:
        if self.last - self._oldest + 1 >= self.size:
            self._drop_oldest()
        self._ring[event.rv % self.size] = event
        self.last = event.rv
        self.bytes += event.size
        while self._lined and self._lined[0] < self._oldest:  # their events are gone, lines with them
            self._lined.popleft()
        self._trim()

    def keep_line(self, event: Event, form: str, line: bytes) -> bytes:
        """`event`'s line in `form`: the one it holds, else `line`, kept when the event still is."""
        kept = event.lines.get(form)
        if kept is not None:
            return kept
        if event.rv < self._oldest:
            return line
        if not event.lines:
            self._lined.append(event.rv)
        event.lines[form] = line
        event.lines_size += len(line)
        self.bytes += len(line)
        self._trim()
        return line

    def _trim(self) -> None:
        while self.bytes > self.max_bytes:
            if self._lined:
                self._forget_lines(self._lined.popleft())
            elif self._oldest < self.last:
                self._drop_oldest()
            else:
                return

    def _forget_lines(self, rv: int) -> None:
        event = self._ring[rv % self.size] if self._oldest <= rv <= self.last else None
        if event is not None:
            self.bytes -= event.lines_size
            event.lines, event.lines_size = {}, 0

    def _drop_oldest(self) -> None:
        slot = self._oldest % self.size
        dropped = self._ring[slot]
        if dropped is not None:
            self.bytes -= dropped.size + dropped.lines_size
            self._dropped[dropped.storage] = dropped.rv
        self._ring[slot] = None
        self._oldest += 1

    @property
    def oldest(self) -> int:
        return self._oldest

    def after(self, rv: int, limit: int | None = None) -> list[Event]:
        """Events with resourceVersion > rv, at most `limit`. Raises 410 when some are gone."""
        if rv < self.oldest - 1:
            raise too_old_resource_version(rv, self.oldest - 1)
        end = self.last if limit is None else min(self.last, rv + limit)
        # every slot from the oldest RV kept to the last one written holds its event (None is only
        # ever in slots not written yet, which this range never reaches)
        ring, size = cast("list[Event]", self._ring), self.size
        return [ring[r % size] for r in range(rv + 1, end + 1)]

    def after_of(self, storage: str, rv: int, limit: int | None = None) -> list[Event]:
        """`after(rv, limit)` for a reader of one storage key: events of other keys that are gone
        since `rv` lose it nothing, so it reads on from the oldest kept (as kube-apiserver's watch
        cache, one per resource, does). Raises 410 only when an event of `storage` is gone."""
        if self.first - 1 <= rv < self._oldest - 1 and self._dropped.get(storage, 0) <= rv:
            rv = self._oldest - 1
        return self.after(rv, limit)


class Bucket:
    """The objects of one storage key: a dict, a lazily sorted key list and field indexes."""

    def __init__(self, info: ResourceInfo) -> None:
        self.info = info
        self.objects: dict[Key, Stored] = {}
        self.writes = 0  # bumped on every insert and discard: readers that cache a view compare it
        self._keys: list[Key] = []
        self._sorted = True
        paths = {path for _, path in info.fields}
        self.indexes: dict[str, dict[str, dict[Key, Stored]]] = {p: {} for p in INDEXED_FIELDS & paths}

    def sorted_keys(self) -> list[Key]:
        if not self._sorted:
            self._keys = sorted(self.objects)
            self._sorted = True
        return self._keys

    def insert(self, stored: Stored, previous: Stored | None) -> None:
        key = stored.key
        self.writes += 1
        if previous is None:
            if self._sorted and (not self._keys or key > self._keys[-1]):
                self._keys.append(key)
            else:
                self._sorted = False
        for path, index in self.indexes.items():
            if previous is not None:
                self._unindex(index, previous.fields.get(path, ""), key)
            index.setdefault(stored.fields.get(path, ""), {})[key] = stored
        self.objects[key] = stored

    def discard(self, stored: Stored) -> None:
        key = stored.key
        self.writes += 1
        self.objects.pop(key, None)
        if self._sorted and self._keys and self._keys[-1] == key:
            self._keys.pop()
        else:
            self._sorted = False
        for path, index in self.indexes.items():
            self._unindex(index, stored.fields.get(path, ""), key)

    @staticmethod
    def _unindex(index: dict[str, dict[Key, Stored]], value: str, key: Key) -> None:
        entries = index.get(value)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del index[value]

    def candidates(self, namespace: str | None, pinned: tuple[str, str] | None) -> list[Key]:
        """Sorted keys that may match: from a field index, a namespace range, or all."""
        if pinned is not None and pinned[0] in self.indexes:
            keys = sorted(self.indexes[pinned[0]].get(pinned[1], {}))
            return keys if namespace is None else [k for k in keys if k[0] == namespace]
        keys = self.sorted_keys()
        if namespace is None:
            return keys
        lo = bisect.bisect_left(keys, (namespace, ""))
        hi = bisect.bisect_left(keys, (namespace + "\x00", ""))
        return keys[lo:hi]


@dataclass(frozen=True)
class Page:
    items: list[Stored]
    rv: int
    next_start: Key | None  # the last key returned when more items match, else None


class Store:
    def __init__(
        self,
        *,
        facts: Facts,
        history_size: int = 100_000,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        start_rv: int = 0,
        persistence: Persistence | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self._facts = facts
        self._rv = start_rv
        self.history = History(history_size, start_rv + 1, history_bytes)
        self._buckets: dict[str, Bucket] = {}
        self._persistence = persistence
        self._listeners: list[Callable[[str], None]] = []

    @property
    def rv(self) -> int:
        return self._rv

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call `listener(storage)` after every write, with the storage key written (from the writing
        thread, with the lock held)."""
        with self.lock:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: Callable[[str], None]) -> None:
        with self.lock:
            self._listeners = [known for known in self._listeners if known is not listener]

    def bucket(self, info: ResourceInfo) -> Bucket:
        found = self._buckets.get(info.storage)
        if found is None:
            found = self._buckets[info.storage] = Bucket(info)
        return found

    def has_bucket(self, storage: str) -> bool:
        return storage in self._buckets

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Stored | None:
        found = self._buckets.get(info.storage)
        return None if found is None else found.objects.get((namespace, name))

    def count(self, info: ResourceInfo, namespace: str | None = None) -> int:
        found = self._buckets.get(info.storage)
        if found is None:
            return 0
        return len(found.objects) if namespace is None else len(found.candidates(namespace, None))

    def make(self, info: ResourceInfo, obj: JsonObject, rv: int) -> Stored:
        """Serialise one version (its metadata.resourceVersion must already be `rv`)."""
        meta: ObjectMeta = obj.get("metadata") or {}
        return Stored(
            namespace=meta.get("namespace", "") if info.namespaced else "",
            name=meta.get("name", ""),
            rv=rv,
            raw=dumps(obj),
            labels=meta.get("labels") or {},
            fields=field_values(obj, info.fields),
            info=info,
        )

    def facts(self, stored: Stored) -> RowFacts:
        """The table facts of a version, computed once (most versions are never printed)."""
        found = stored.facts
        if found is None:
            found = stored.facts = self._facts(stored.info, stored.obj())
        return found

    def _commit(self, event: Event) -> None:
        self.history.append(event)
        for listener in self._listeners:
            listener(event.storage)

    def put(self, info: ResourceInfo, obj: JsonObject, previous: Stored | None) -> Stored:
        """Write a new version (ADDED when `previous` is None, else MODIFIED) with the next RV."""
        with self.lock:
            rv = self._rv + 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
            stored = self.make(info, obj, rv)
            if len(stored.raw) > MAX_OBJECT_BYTES:
                raise ApiError(500, "", "etcdserver: request is too large", {})
            self.bucket(info).insert(stored, previous)
            self._rv = rv
            if self._persistence is not None:
                self._persistence.put(info.storage, stored.key, stored.raw, rv)
            self._commit(Event(rv, info.storage, MODIFIED if previous else ADDED, stored, previous))
            return stored

    def remove(self, info: ResourceInfo, previous: Stored) -> Stored:
        """Delete an object; the DELETED event carries its last state at the deletion's RV."""
        with self.lock:
            rv = self._rv + 1
            obj = previous.obj()
            obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
            final = self.make(info, obj, rv)
            self.bucket(info).discard(previous)
            self._rv = rv
            if self._persistence is not None:
                self._persistence.delete(info.storage, previous.key, rv)
            self._commit(Event(rv, info.storage, DELETED, final, previous))
            return final

    def load(self, info: ResourceInfo, raw: bytes) -> Stored:
        """Restore a persisted object without an event (start-up only)."""
        obj: JsonObject = jsoncodec.loads(raw)
        rv = int(obj.get("metadata", {}).get("resourceVersion") or 0)
        stored = self.make(info, obj, rv)
        self.bucket(info).insert(stored, self.get(info, stored.namespace, stored.name))
        return stored

    def objects(self, info: ResourceInfo, namespace: str | None = None) -> list[Stored]:
        """The current objects in key order (a snapshot list)."""
        with self.lock:
            found = self._buckets.get(info.storage)
            if found is None:
                return []
            return [found.objects[k] for k in found.candidates(namespace, None)]

    def drop_bucket(self, storage: str) -> None:
        with self.lock:
            self._buckets.pop(storage, None)

    def events_after(self, rv: int, limit: int) -> list[Event]:
        with self.lock:
            return self.history.after(rv, limit)

    def events_of(self, storage: str, rv: int, limit: int) -> list[Event]:
        """`events_after` for a reader of `storage` alone (`History.after_of`)."""
        with self.lock:
            return self.history.after_of(storage, rv, limit)

    def share_line(self, event: Event, form: str, line: bytes) -> bytes:
        """Keep `line`, the watch line of `event` in `form`, for every watcher that sends that form;
        returns the one to send (another watcher may have rendered it first). The history counts it."""
        with self.lock:
            return self.history.keep_line(event, form, line)

    def _state_at(self, storage: str, rv: int) -> dict[Key, Stored | None]:
        """For keys changed after `rv`: their version at `rv` (None when they did not exist)."""
        overlay: dict[Key, Stored | None] = {}
        try:
            events = self.history.after(rv)
        except ApiError:
            raise expired(CONTINUE_TOO_OLD) from None
        for event in events:
            if event.storage == storage:
                key = event.new.key
                if key not in overlay:
                    overlay[key] = event.old
        return overlay

    def page(
        self,
        info: ResourceInfo,
        namespace: str | None,
        match: Callable[[Stored], bool] | None,
        *,
        pinned: tuple[str, str] | None = None,
        start: Key | None = None,
        limit: int = 0,
        at_rv: int | None = None,
    ) -> Page:
        """Objects in key order after `start`, at most `limit` (0: all), as of `at_rv` (None: now),
        in `namespace` (None: all) and passing `match` (None: all). `pinned` (path, value) lets a
        field index narrow the scan."""
        with self.lock:
            bucket = self._buckets.get(info.storage)
            rv = self._rv if at_rv is None else at_rv
            overlay = self._state_at(info.storage, at_rv) if at_rv is not None and at_rv < self._rv else {}
            if bucket is None and not overlay:
                return Page([], rv, None)
            keys = bucket.candidates(namespace, pinned) if bucket is not None else []
            current = bucket.objects if bucket is not None else {}
            if overlay:
                extra = [k for k in overlay if namespace is None or k[0] == namespace]
                keys = sorted(set(keys).union(extra))
            position = 0 if start is None else bisect.bisect_right(keys, start)
            if match is None and not overlay:
                end = len(keys) if not limit else min(len(keys), position + limit)
                items = [current[k] for k in keys[position:end]]
                return Page(items, rv, items[-1].key if end < len(keys) and items else None)
            return self._scan(keys, position, overlay, current, match, limit, rv)

    @staticmethod
    def _scan(
        keys: list[Key],
        position: int,
        overlay: dict[Key, Stored | None],
        current: dict[Key, Stored],
        match: Callable[[Stored], bool] | None,
        limit: int,
        rv: int,
    ) -> Page:
        items: list[Stored] = []
        for key in _slice(keys, position):
            stored = overlay[key] if key in overlay else current.get(key)
            if stored is None or (match is not None and not match(stored)):
                continue
            if limit and len(items) == limit:
                return Page(items, rv, items[-1].key)
            items.append(stored)
        return Page(items, rv, None)


def _slice(keys: list[Key], start: int) -> Iterable[Key]:
    return (keys[i] for i in range(start, len(keys)))


CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
