"""The skeleton every workload controller shares: a queue of keys, one worker, retries, writes.

A `Controller` registers handlers on shared informers in its constructor (`watch(path, Kind,
handler)`: the informer hands out that kind, `Change[Kind]`), queues `namespace/name` keys from them,
and `sync(key)` brings that one object's world to what it asks for. Its queue is
`runtimekit.base.workqueue.WorkQueue` (a key is never synced twice at once; a failed sync is retried
after the key's exponential back-off, which starts over once a sync succeeds), its worker a
`runtimekit.base.threads.Workers` thread. `requeue_after` keeps one timer per key (the earliest), so
a controller may ask on every sync. A sync is level-based, so a retry simply looks again.

Writes go through `create`, `delete`, `patch_meta` and `put_status`, which also record the answer in
the informer's cache (so the next sync sees them at once) and ignore what kube's controllers ignore
(a 404 on delete; a 409 makes the sync retry). They take and give the kind of the cache they write
to (a `Pod` into `ObjectCache[Pod]`): the API server's answer is typed where it comes in, with a cast.
`claim` adopts and releases objects by selector as kube's ControllerRefManager does. `event` records
an Event about an object.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers
from runtimekit.base.workqueue import WorkQueue
from runtimekit.cluster.controllers.pods import is_terminating
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import record_event
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import BY_CONTROLLER, Change, Informers, ObjectCache, SharedInformer, controller_uids
from runtimekit.kube.objects import DeleteOptions, JsonObject, LabelSelector, OwnerReference, labels_of, meta
from runtimekit.kube.semantics.labels import label_selector_or_nothing
from runtimekit.kube.semantics.owners import controller_uid

log = logging.getLogger(__name__)
T = TypeVar("T", bound=Mapping[str, Any])  # the kind a cache holds: Pod, ReplicaSet, KubeObject, ...


def path_of(api_version: str, plural: str, obj: Mapping[str, Any], subresource: str | None = None) -> str:
    """The object's path (of any kind), or its subresource's."""
    m = meta(obj)
    return object_path(api_version, plural, str(m.get("namespace", "")), str(m.get("name")), subresource)


class Controller:
    """See the module docstring. Subclasses set `name` and implement `sync`."""

    name = "controller"

    def __init__(self, http: KubeHttp, informers: Informers, clock: Callable[[], float] = time.time) -> None:
        self.http, self.informers, self.clock = http, informers, clock
        self.queue = WorkQueue(Backoff(initial=0.5, maximum=30.0))
        self.watched: list[SharedInformer[Any]] = []
        self._workers = Workers(self.name)
        self._timers: dict[str, float] = {}  # key -> when its earliest requeue is due (monotonic)
        self._timers_lock = threading.Lock()

    def watch(
        self, path: str, kind: type[T], handler: Callable[[Change[T]], None], optional: bool = False
    ) -> SharedInformer[T]:
        """The shared informer of `path`, its objects typed `kind`, with `handler` on its changes."""
        shared = self.informers.resource(path, kind, optional=optional)
        shared.add_indexer(BY_CONTROLLER, controller_uids)  # what `claim` and the syncs look up
        shared.on(handler)
        self.watched.append(shared)
        return shared

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Controller:
        self._workers.spawn(self.name, self._work)
        return self

    def synced(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        return all(s.informer.synced.wait(max(0.0, deadline - time.monotonic())) for s in self.watched)

    def stop(self, timeout_s: float = 5.0) -> None:
        self.queue.close()
        self._workers.stop(timeout_s)

    def requeue_after(self, key: str, delay_s: float) -> None:
        """Sync `key` again after `delay_s`, unless an earlier requeue of it is still to come."""
        now = time.monotonic()
        due = now + max(0.0, delay_s)
        with self._timers_lock:
            known = self._timers.get(key)
            if known is not None and now < known <= due:
                return
            self._timers[key] = due
        self.queue.add_after(key, delay_s)

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                if not self.synced(0):  # never act on a half-listed world
                    self.queue.add_after(key, 0.2)
                    continue
                self.sync(key)
                self.queue.forget(key)
            except KubeError as exc:
                log.info("%s %s: %s; again in %.1f s", self.name, key, exc, self.queue.retry(key))
            except Exception:
                log.exception("%s %s: sync failed; again in %.1f s", self.name, key, self.queue.retry(key))
            finally:
                self.queue.done(key)

    def sync(self, key: str) -> None:
        raise NotImplementedError

    # -- writes -------------------------------------------------------------------------------
    def create(self, api_version: str, plural: str, body: T, cache: ObjectCache[T]) -> T:
        namespace = str(meta(body).get("namespace", ""))
        made = cast(T, self.http.post(object_path(api_version, plural, namespace), body))
        cache.written(made)
        return made

    def delete(self, obj: T, api_version: str, plural: str, cache: ObjectCache[T], propagation: str = "") -> None:
        """Delete with a UID precondition; an object already gone is fine."""
        options: DeleteOptions = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": meta(obj).get("uid", "")},
        }
        if propagation:
            options["propagationPolicy"] = propagation
        try:
            answer = self.http.delete(path_of(api_version, plural, obj), options)
        except KubeError as exc:
            if exc.code == 404:
                return
            raise
        if answer.get("kind") == "Status":  # kinds that do not return the object: it is gone
            return
        if is_terminating(answer):
            cache.written(cast(T, answer))
        else:
            cache.removed(cast(T, answer))

    def patch_meta(self, obj: T, api_version: str, plural: str, metadata: JsonObject, cache: ObjectCache[T]) -> T:
        """A merge patch of metadata (`metadata` is the patch: null removes a field), conditional on
        the version we saw."""
        body = {"metadata": {**metadata, "resourceVersion": meta(obj).get("resourceVersion")}}
        patched = cast(T, self.http.patch(path_of(api_version, plural, obj), body, "merge"))
        cache.written(patched)
        return patched

    def put_status(self, obj: T, api_version: str, plural: str, status: Mapping[str, Any], cache: ObjectCache[T]) -> T:
        """Replace the status (PUT .../status, conditional on the version we saw); `status` is the
        status of `obj`'s kind."""
        body = {**obj, "status": status}
        updated = cast(T, self.http.put(path_of(api_version, plural, obj, "status"), body))
        cache.written(updated)
        return updated

    def event(self, obj: Mapping[str, Any], api_version: str, kind: str, type_: str, reason: str, text: str) -> None:
        """A `type_` Event about `obj`, of any kind."""
        involved = {"apiVersion": api_version, "kind": kind, "metadata": meta(obj)}
        record_event(self.http, involved, type_, reason, text, self.name)

    # -- ownership ----------------------------------------------------------------------------
    def claim(
        self,
        owner: Mapping[str, Any],
        owner_ref: OwnerReference,
        selector: LabelSelector | None,
        candidates: Sequence[T],
        target: tuple[str, str, ObjectCache[T]],
    ) -> list[T]:
        """The candidates `owner` (of any kind) controls once orphans that match its selector are
        adopted and owned objects that no longer match are released (kube's ClaimPods /
        ClaimReplicaSets)."""
        api_version, plural, cache = target
        uid = meta(owner).get("uid", "")
        claimed: list[T] = []
        selects = label_selector_or_nothing(selector)
        for obj in candidates:
            controller = controller_uid(obj)
            matches = selects.matches(labels_of(obj))
            if controller == uid:
                if matches or is_terminating(owner):
                    claimed.append(obj)
                else:
                    refs = [r for r in meta(obj).get("ownerReferences") or [] if r.get("uid") != uid]
                    self._try_patch(obj, api_version, plural, {"ownerReferences": refs}, cache)
            elif not controller and matches and not is_terminating(owner) and not is_terminating(obj):
                refs = [*(meta(obj).get("ownerReferences") or []), owner_ref]
                adopted = self._try_patch(obj, api_version, plural, {"ownerReferences": refs}, cache)
                if adopted is not None:
                    claimed.append(adopted)
        return claimed

    def _try_patch(
        self, obj: T, api_version: str, plural: str, metadata: JsonObject, cache: ObjectCache[T]
    ) -> T | None:
        try:
            return self.patch_meta(obj, api_version, plural, metadata, cache)
        except KubeError as exc:
            if exc.code in (404, 409):
                return None  # gone or changed: the next sync looks again
            raise
