"""Watch streams: initial events, resuming from a resourceVersion, bookmarks, selector transitions.

A `WatchStream` follows the store's event history from a cursor (`resourceVersion`), so a watch
resumes exactly where a list or an earlier watch left off; nothing is queued per watcher. Each
event's JSON line is rendered once per served version and kept on the event for every watcher
(`Store.share_line`, counted in the history's byte bound); Table lines, whose cells depend on the
moment they are printed (ages, the GPUs allocated on a node), are rendered per watcher. A watcher
holds at most one write of about `WRITE_BYTES` beyond the shared history: it writes and waits for
the connection to take it (aiohttp's drain) before it renders more, so a client that reads slowly
costs a bounded buffer, not the burst. A cursor older than the retained history of its kind (a watcher
that fell behind by more than the history keeps, in events or bytes, and lost an event of the kind
it watches: events of other kinds that are gone lose it nothing) ends the stream with an ERROR event
carrying a 410 `Expired` Status ("too old resource version"), as kube-apiserver's watch cache does
to a watch that resumes from there after it closed the slow one; the client lists again. With
selectors, an object that starts or stops matching is sent as ADDED or DELETED. `Waker` wakes the
streams of the kind written after a write in any thread; a stream woken by its bookmark timer reads
past the other kinds' events first, so its bookmark carries the current resourceVersion.
Called by the HTTP layer with a `write` coroutine.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.listing import Filter, TableRequest, table_bytes
from runtimekit.cluster.apiserver.operations import Api
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import ADDED, DELETED, MODIFIED, Event, Stored, dumps
from runtimekit.cluster.apiserver.tables import PodGpu, TableMaker
from runtimekit.kube.objects import JsonObject

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_BATCH = 500  # events read from the history at a time
WRITE_BYTES = 128 * 1024  # a watcher writes once it has rendered this much, then waits for the client


class Waker:
    """The streams waiting for a write, by the storage key they watch: a write wakes only the
    streams of its key, each waiting on a future of its own (a plain future costs less than
    `asyncio.wait_for` on a shared Event, a task and a timer per wait, which every stream paid on
    every write of any kind). A write on the loop's thread wakes its streams two turns of the loop
    later, not at once: the requests whose bytes came in the same turn finish their writes first, so
    a stream sends a burst in one write (one send and one read at each end) where it sent each event
    alone; once the loop is idle, that is a few microseconds."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.get_ident()
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}
        self._written: set[str] = set()  # keys written by other threads, not woken yet
        self._due: set[str] = set()  # keys written on the loop's thread, woken two turns later
        self._lock = threading.Lock()
        self.closing = False
        self.round = 0  # `end_round` ends the watches started before it; later ones run on

    def wait(self, storage: str) -> asyncio.Future[None]:
        """A future done at the next write of `storage` or at close. Taken on the event loop's thread
        after the caller checked there is nothing new: every wake-up runs on that thread, so none is
        missed."""
        waiting: asyncio.Future[None] = self._loop.create_future()
        self._waiting.setdefault(storage, set()).add(waiting)
        return waiting

    def forget(self, storage: str, waiting: asyncio.Future[None]) -> None:
        """`waiting` ended otherwise (its stream's alarm, a cancelled stream): do not keep it."""
        found = self._waiting.get(storage)
        if found is not None:
            found.discard(waiting)

    def notify(self, storage: str) -> None:
        """Store listener; safe from any thread, coalesces wake-ups from other threads."""
        if threading.get_ident() == self._thread:
            if self.closing or self._loop.is_closed():  # a stopped server's: no stream waits (a thread id is reused)
                return
            if not self._due:
                self._loop.call_soon(self._loop.call_soon, self._wake_due)
            self._due.add(storage)
            return
        with self._lock:
            first = not self._written
            self._written.add(storage)
        if first and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_written)

    def _wake_due(self) -> None:
        due, self._due = self._due, set()
        for storage in due:
            self._wake(storage)

    def _wake_written(self) -> None:
        with self._lock:
            written, self._written = self._written, set()
        for storage in written:
            self._wake(storage)

    def _wake(self, storage: str) -> None:
        waiting = self._waiting.pop(storage, None)
        if waiting:
            for future in waiting:
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        self.closing = True
        for storage in list(self._waiting):
            self._wake(storage)

    def end_round(self) -> None:
        """End every watch open now, as their timeout would (on the loop's thread)."""
        self.round += 1
        for storage in list(self._waiting):
            self._wake(storage)


@dataclass(frozen=True)
class WatchRequest:
    info: ResourceInfo
    filter: Filter
    start_rv: int | None  # None: begin with the current state as ADDED events
    send_initial: bool = False  # sendInitialEvents=true: current state, then the initial-events-end bookmark
    bookmarks: bool = False
    timeout: float | None = None
    table: TableRequest | None = None  # None: plain objects


@dataclass
class WatchStream:
    api: Api
    maker: TableMaker
    waker: Waker
    request: WatchRequest
    write: Callable[[bytes], Awaitable[None]]
    bookmark_interval: float = 60.0
    clock: Callable[[], float] = time.monotonic
    cursor: int = 0
    _headers_sent: bool = field(default=False)
    # the wait in progress and the timer that ends it at the next bookmark or the deadline; the
    # timer is kept across wake-ups while that moment stays the same
    _waiting: asyncio.Future[None] | None = field(default=None)
    _alarm: asyncio.TimerHandle | None = field(default=None)
    _alarm_at: float | None = field(default=None)

    async def run(self) -> None:
        deadline = None if self.request.timeout is None else self.clock() + self.request.timeout
        started = self.waker.round
        try:
            await self._start()
            next_bookmark = self.clock() + self.bookmark_interval
            while self._open(started) and (deadline is None or self.clock() < deadline):
                if await self._pump():
                    continue
                now = self.clock()
                if self.request.bookmarks and now >= next_bookmark:
                    await self.write(self._bookmark(initial_end=False))
                    next_bookmark = now + self.bookmark_interval
                limit = next_bookmark if self.request.bookmarks else None
                if deadline is not None:
                    limit = deadline if limit is None else min(limit, deadline)
                await self._wait(limit)
        except ApiError as exc:
            await self.write(b'{"type":"ERROR","object":' + dumps(exc.status()) + b"}\n")
        finally:
            if self._alarm is not None:
                self._alarm.cancel()

    def _open(self, started: int) -> bool:
        return not self.waker.closing and self.waker.round == started

    async def _start(self) -> None:
        store = self.api.store
        start = self.request.start_rv
        if start is not None and start > store.rv:
            raise _too_large(start, store.rv)
        if start is not None and not self.request.send_initial:
            store.events_after(start, 0)  # 410 now when the history no longer reaches back to it
            self.cursor = start
            return
        with store.lock:
            page = store.page(
                self.request.info,
                self.request.filter.namespace,
                self.request.filter.matcher,
                pinned=self.request.filter.pinned,
            )
        self.cursor = page.rv
        out = _Lines()
        for stored in page.items:
            if out.add(self._line(ADDED, stored)):
                await self.write(out.take())
        if out:
            await self.write(out.take())
        if self.request.send_initial:
            await self.write(self._bookmark(initial_end=True))

    async def _pump(self) -> bool:
        """Send the next lines after the cursor; True when more events wait (a full write, or events
        that came meanwhile), False when it caught up, so a wake-up by a write of another kind costs
        one read of the history, not two."""
        lines = self._next_lines()
        if lines:
            await self.write(lines)
        return self.api.store.rv > self.cursor

    def _next_lines(self) -> bytes:
        """The lines of the events after the cursor, up to about `WRITE_BYTES`, moving the cursor past
        the events they cover. No event is held once it returns, so a watcher waiting for its client
        keeps nothing alive that the history has let go."""
        out = _Lines()
        for event in self.api.store.events_of(self.request.info.storage, self.cursor, _BATCH):
            self.cursor = event.rv
            if event.storage == self.request.info.storage:
                line = self._render(event)
                if line and out.add(line):
                    break
        return out.take()

    async def _wait(self, limit: float | None) -> None:
        """Until the next write, or `limit` (on `clock`; None: no limit), whichever comes first."""
        if self.api.store.rv > self.cursor or self.waker.closing:
            return
        waiting = self._waiting = self.waker.wait(self.request.info.storage)
        if limit is not None and limit != self._alarm_at:
            if self._alarm is not None:
                self._alarm.cancel()
            self._alarm_at = limit
            self._alarm = asyncio.get_running_loop().call_later(max(0.0, limit - self.clock()), self._ring)
        try:
            await waiting
        finally:
            self._waiting = None
            self.waker.forget(self.request.info.storage, waiting)

    def _ring(self) -> None:
        self._alarm = self._alarm_at = None
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    def _render(self, event: Event) -> bytes | None:
        flt = self.request.filter
        if flt.namespace is not None and event.new.namespace != flt.namespace:
            return None
        if flt.everything:
            return self._event_line(event, event.type)
        now = event.type != DELETED and flt.matches(event.new)
        before = event.old is not None and flt.matches(event.old)
        if event.type == DELETED:
            return self._event_line(event, DELETED) if before else None
        if now:
            return self._event_line(event, MODIFIED if before else ADDED)
        if before and event.old is not None:
            return self._line(DELETED, _old_at(self.api, self.request.info, event, event.old))
        return None

    def _event_line(self, event: Event, kind: str) -> bytes:
        """The line sending `event.new` as `kind`: JSON lines shared by all watchers of its version."""
        if self.request.table is not None:
            return self._line(kind, event.new)
        form = kind + " " + self.request.info.api_version
        line = event.lines.get(form)
        if line is None:
            line = self.api.store.share_line(event, form, self._line(kind, event.new))
        return line

    def _line(self, kind: str, stored: Stored) -> bytes:
        served = self.api.served(self.request.info, stored)
        prefix = b'{"type":"' + kind.encode() + b'","object":'
        if self.request.table is None:
            return prefix + served + b"}\n"
        table = TableRequest(self.request.table.version, self.request.table.include_object, not self._headers_sent)
        self._headers_sent = True
        body = table_bytes(
            self.maker,
            self.request.info,
            [(stored, served)],
            table,
            rv=stored.rv,
            pods_on_node=lambda node: pods_on_node(self.api, node),
            facts=self.api.store.facts,
        )
        return prefix + body + b"}\n"

    def _bookmark(self, *, initial_end: bool) -> bytes:
        info = self.request.info
        meta: JsonObject = {"resourceVersion": str(self.cursor), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + dumps(obj) + b"}\n"


class _Lines:
    """Lines to write together, up to about `WRITE_BYTES` (one line may be larger)."""

    __slots__ = ("_lines", "_size")

    def __init__(self) -> None:
        self._lines: list[bytes] = []
        self._size = 0

    def add(self, line: bytes) -> bool:
        """Keep `line`; True when the lines kept are due to be written."""
        self._lines.append(line)
        self._size += len(line)
        return self._size >= WRITE_BYTES

    def take(self) -> bytes:
        out = b"".join(self._lines)
        self._lines.clear()
        self._size = 0
        return out

    def __bool__(self) -> bool:
        return bool(self._lines)


def _old_at(api: Api, info: ResourceInfo, event: Event, old: Stored) -> Stored:
    """The previous content at the event's resourceVersion (what a watcher that stops matching gets)."""
    cached = event.cache.get("old-at-rv")
    if cached is None:
        obj = old.obj()
        obj["metadata"]["resourceVersion"] = str(event.rv)
        cached = event.cache["old-at-rv"] = api.store.make(api.storage_of(info), obj, event.rv)
    return cached


def pods_on_node(api: Api, node: str) -> list[PodGpu]:
    """What each pod bound to `node` adds to its GPU ALLOCATED cell."""
    pods = api.table.lookup("", "v1", "pods")
    if pods is None:
        return []
    page = api.store.page(pods, None, None, pinned=("spec.nodeName", node))
    facts = [api.store.facts(s)[1] for s in page.items]
    return [f for f in facts if isinstance(f, PodGpu)]


def _too_large(requested: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )
