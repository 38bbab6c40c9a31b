"""List + watch for one kind of object, delivered to a handler as ADDED, MODIFIED and DELETED.

The loop lists (paged), then watches from the list's resourceVersion with bookmarks (so a
reconnect resumes from a recent version), re-lists on `410 Gone` and reconciles: objects that
vanished while the watch was down are delivered as DELETED, changed ones as MODIFIED. Errors back
off exponentially (with jitter, capped). One thread per informer; the handler is called on it.
An `Informer[T]` hands its handler objects typed `T` (a `kube.objects` kind such as `Pod`, or
`JsonObject`), cast once where the JSON enters. `transform` rewrites each object before the handler and
the informer see it; `strip_managed_fields` is client-go's TransformStripManagedFields, which
kube-scheduler sets on its informers: server-side apply makes `metadata.managedFields` about a third
of a pod, and a cache that never reads it should not hold it (`decode=jsoncodec.loads_event_lean`
skips it in a pod's or node's watch events without building it; the transform still strips lists).
Callers: the scheduler cache, the controller, the
device plugin's node pods, the shared informers (`kube.informers`), the embedded cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar, cast

from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers
from runtimekit.kube import jsoncodec
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.objects import JsonObject, meta, object_key

log = logging.getLogger(__name__)
T = TypeVar("T", bound=Mapping[str, object])
T_contra = TypeVar("T_contra", bound=Mapping[str, object], contravariant=True)


class Handler(Protocol[T_contra]):
    def __call__(self, kind: str, obj: T_contra, /) -> None:
        """kind is ADDED, MODIFIED or DELETED. Must not block for long; exceptions are logged."""


def strip_managed_fields(obj: JsonObject) -> JsonObject:
    """The object without `metadata.managedFields` (changed in place: the informer owns what it decoded)."""
    metadata = obj.get("metadata")
    if metadata:
        metadata.pop("managedFields", None)
    return obj


class Informer(Generic[T]):
    def __init__(
        self,
        http: KubeHttp,
        path: str,
        handler: Handler[T],
        params: Mapping[str, str] | None = None,
        name: str = "",
        watch_timeout: int = 300,
        on_relist: Callable[[], None] | None = None,
        optional: bool = False,
        forbidden_ok: bool = False,
        transform: Callable[[JsonObject], JsonObject] | None = None,
        decode: Callable[[bytes], Any] = jsoncodec.loads,
    ) -> None:
        self.http, self.path, self.handler = http, path, handler
        self.params = dict(params or {})
        self.name = name or path
        self.watch_timeout = watch_timeout
        self.on_relist = on_relist
        self.optional = optional  # a kind the server may not serve (e.g. a CRD not installed)
        # a kind the role may not grant (a ClusterRole from before it was read): synced and empty
        # until it is, looked at again every minute
        self.forbidden_ok = forbidden_ok
        self.transform = transform
        self.decode = decode  # of each watch event's line (`jsoncodec.loads_event_lean`: no managedFields)
        self.served = True
        self.synced = threading.Event()
        self.resource_version = ""
        self.relists = 0
        self._known: dict[str, str] = {}  # key -> resourceVersion of what the handler last saw
        self._workers = Workers(f"informer {self.name}")
        self.backoff = Backoff(initial=0.2, maximum=30.0, jitter=0.2)

    def start(self) -> Informer[T]:
        self._workers.spawn(f"informer {self.name}", self.run)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._workers.stop(timeout)

    def run(self) -> None:
        while not self._workers.stopped:
            try:
                if not self.resource_version:
                    self._relist()
                self._watch()
                self.backoff.reset()
            except KubeError as exc:
                if self._workers.stopped:  # the connection was closed under a stopped watch: not an error
                    break
                if exc.code == 410:
                    log.info("%s: resourceVersion %s expired, listing again", self.name, self.resource_version)
                    self.resource_version = ""
                    continue
                if exc.code == 403 and self.forbidden_ok:
                    if self.served:
                        log.warning("%s: not permitted (%s); will look again every minute", self.name, exc.message)
                    self.served = False
                    self.synced.set()
                    self._workers.wait(60.0)
                    continue
                if exc.code == 404 and self.optional:
                    if self.served:
                        log.info("%s: not served by the API server; will look again every minute", self.name)
                    self.served = False
                    self.synced.set()
                    self._workers.wait(60.0)
                    continue
                delay = self.backoff.next()
                log.warning("%s: %s; retrying in %.1f s", self.name, exc, delay)
                self._workers.wait(delay)
            except Exception:
                delay = self.backoff.next()
                log.exception("%s: unexpected error; retrying in %.1f s", self.name, delay)
                self._workers.wait(delay)

    def _deliver(self, kind: str, obj: JsonObject) -> None:
        if self.transform is not None:
            obj = self.transform(obj)
        try:
            self.handler(kind, cast(T, obj))
        except Exception:
            log.exception("%s: handler failed on %s %s", self.name, kind, object_key(obj))

    def _relist(self) -> None:
        items, version = self.http.list(self.path, self.params)
        self.relists += 1
        seen: dict[str, str] = {}
        for obj in items:
            key = object_key(obj)
            rv = str(meta(obj).get("resourceVersion", ""))
            seen[key] = rv
            previous = self._known.get(key)
            if previous is None:
                self._deliver("ADDED", obj)
            elif previous != rv:
                self._deliver("MODIFIED", obj)
        for key in set(self._known) - set(seen):
            namespace, _, name = key.rpartition("/")
            stub: JsonObject = {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
            self._deliver("DELETED", stub)
        self._known = seen
        self.resource_version = version
        self.served = True
        self.synced.set()
        if self.on_relist is not None:
            self.on_relist()

    def _watch(self) -> None:
        for event in self.http.watch(self.path, self.resource_version, self.params, self.watch_timeout, self.decode):
            if self._workers.stopped:
                return
            rv = str(meta(event.object).get("resourceVersion", ""))
            if event.type == "BOOKMARK":
                self.resource_version = rv or self.resource_version
                continue
            key = object_key(event.object)
            if event.type == "DELETED":
                self._known.pop(key, None)
            else:
                self._known[key] = rv
            if rv:
                self.resource_version = rv
            self._deliver(event.type, event.object)
