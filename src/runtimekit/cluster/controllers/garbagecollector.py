"""The garbage collector of owner references, as kube-controller-manager's.

It keeps a graph (owner UID -> dependents) of the kinds in `WATCHED` and acts as kube's does:
- **Background**: a dependent all of whose owners are gone (absent, or another object under the
  name) is deleted, itself with the propagation its finalizers ask for (`orphan` -> Orphan,
  `foregroundDeletion` -> Foreground, else Background); references to gone owners are dropped from a
  dependent that still has a live owner.
- **Foreground** (an owner with `deletionTimestamp` and the `foregroundDeletion` finalizer): its
  dependents are deleted (in the foreground themselves when they have dependents); once none with
  `blockOwnerDeletion: true` is left, the finalizer is removed and the API server deletes the owner.
- **Orphan** (`orphan` finalizer): the owner's reference is removed from each dependent, then the
  finalizer from the owner.
An owner not in the graph (a kind not watched, or not seen yet) is looked up on the API server (its
resource found through discovery); owners in another namespace than a namespaced dependent count as
absent. One worker runs keys `delete:<uid>`, `foreground:<uid>` and `orphan:<uid>`; conflicts retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from runtimekit.cluster.controllers.base import Controller
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import Change, Informers, ObjectCache
from runtimekit.kube.objects import KubeObject, OwnerReference, meta, object_key

log = logging.getLogger(__name__)
ORPHAN, FOREGROUND = "orphan", "foregroundDeletion"


@dataclass(frozen=True)
class Kind:
    """A watched resource: `v1`/`pods`/`Pod`."""

    api_version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def path(self) -> str:
        return object_path(self.api_version, self.plural)


WATCHED = (
    Kind("v1", "pods", "Pod"),
    Kind("v1", "services", "Service"),
    Kind("v1", "configmaps", "ConfigMap"),
    Kind("v1", "secrets", "Secret"),
    Kind("v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    Kind("apps/v1", "deployments", "Deployment"),
    Kind("apps/v1", "replicasets", "ReplicaSet"),
    Kind("apps/v1", "statefulsets", "StatefulSet"),
    Kind("apps/v1", "daemonsets", "DaemonSet"),
    Kind("apps/v1", "controllerrevisions", "ControllerRevision"),
    Kind("batch/v1", "jobs", "Job"),
    Kind("batch/v1", "cronjobs", "CronJob"),
    Kind("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
    Kind("batch.volcano.sh/v1alpha1", "jobs", "Job"),
)


@dataclass(frozen=True)
class Node:
    """Where a graph member lives: its kind and its cache key."""

    kind: Kind
    key: str


def _finalizers(obj: KubeObject) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def _deleting_with(obj: KubeObject, finalizer: str) -> bool:
    return bool(meta(obj).get("deletionTimestamp")) and finalizer in _finalizers(obj)


class GarbageCollector(Controller):
    """See the module docstring."""

    name = "garbage-collector"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self._lock = threading.Lock()
        self.nodes: dict[str, Node] = {}  # uid -> where it is
        self.dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids
        self.caches: dict[Kind, ObjectCache[KubeObject]] = {}  # objects of any kind: metadata is what it reads
        self._resources: dict[tuple[str, str], tuple[str, bool] | None] = {}  # (apiVersion, kind) -> plural
        for kind in WATCHED:
            self.caches[kind] = self.watch(kind.path, KubeObject, self._handler(kind), True).cache

    def _handler(self, kind: Kind) -> Callable[[Change[KubeObject]], None]:
        return lambda change: self._on_change(kind, change)

    # -- the graph ----------------------------------------------------------------------------
    def _on_change(self, kind: Kind, change: Change[KubeObject]) -> None:
        obj = change.obj
        uid = str(meta(obj).get("uid", ""))
        if not uid:
            return
        old_owners = {str(r.get("uid")) for r in meta(change.old or {}).get("ownerReferences") or []}
        new_owners = {str(r.get("uid")) for r in meta(change.new or {}).get("ownerReferences") or []}
        with self._lock:
            for owner in old_owners - new_owners:
                self.dependents.get(owner, set()).discard(uid)
            for owner in new_owners:
                self.dependents.setdefault(owner, set()).add(uid)
            if change.new is None:
                self.nodes.pop(uid, None)
                dependents = list(self.dependents.get(uid, ()))
            else:
                self.nodes[uid] = Node(kind, object_key(obj))
                dependents = []
        if change.new is None:  # gone: its dependents may be orphans now, its owners may be waiting on it
            for dependent in dependents:
                self.queue.add(f"delete:{dependent}")
            for owner in old_owners:
                self.queue.add(f"foreground:{owner}")
            return
        new = change.new
        if _deleting_with(new, ORPHAN):
            self.queue.add(f"orphan:{uid}")
        if _deleting_with(new, FOREGROUND):
            self.queue.add(f"foreground:{uid}")
        if new_owners and (change.old is None or old_owners != new_owners):
            self.queue.add(f"delete:{uid}")

    def _get(self, uid: str) -> tuple[Kind, KubeObject] | None:
        with self._lock:
            node = self.nodes.get(uid)
        if node is None:
            return None
        obj = self.caches[node.kind].get(node.key)
        if obj is None or meta(obj).get("uid") != uid:
            return None
        return node.kind, obj

    def _dependents_of(self, uid: str) -> list[tuple[Kind, KubeObject]]:
        with self._lock:
            uids = list(self.dependents.get(uid, ()))
        return [found for dependent in uids if (found := self._get(dependent)) is not None]

    # -- work ---------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        verb, _, uid = key.partition(":")
        if verb == "delete":
            self._attempt_to_delete(uid)
        elif verb == "foreground":
            self._deleting_dependents(uid)
        elif verb == "orphan":
            self._orphan(uid)

    def _attempt_to_delete(self, uid: str) -> None:
        found = self._get(uid)
        if found is None:
            return
        kind, obj = found
        if meta(obj).get("deletionTimestamp"):
            if _deleting_with(obj, FOREGROUND):
                self._deleting_dependents(uid)
            return
        refs = list(meta(obj).get("ownerReferences") or [])
        if not refs:
            return
        states = {str(r.get("uid")): self._owner_state(r, obj) for r in refs}
        solid = [u for u, s in states.items() if s in ("solid", "unknown")]
        waiting = [u for u, s in states.items() if s == "waiting"]
        if solid:
            drop = {u for u, s in states.items() if s in ("dangling", "waiting")}
            if drop:
                keep = [r for r in refs if str(r.get("uid")) not in drop]
                self.patch_meta(obj, kind.api_version, kind.plural, {"ownerReferences": keep}, self.caches[kind])
            return
        if waiting and self._dependents_of(uid):
            policy = "Foreground"  # an owner waits on this one: its own dependents go first
        elif ORPHAN in _finalizers(obj):
            policy = "Orphan"
        elif FOREGROUND in _finalizers(obj):
            policy = "Foreground"
        else:
            policy = "Background"
        log.info("garbage-collecting %s %s (propagation %s)", kind.kind, object_key(obj), policy)
        self.delete(obj, kind.api_version, kind.plural, self.caches[kind], propagation=policy)

    def _owner_state(self, ref: OwnerReference, dependent: KubeObject) -> str:
        """`solid` (exists), `waiting` (being deleted in the foreground), `dangling` (gone) or
        `unknown` (its kind cannot be resolved: kept, as if solid)."""
        uid = str(ref.get("uid", ""))
        namespace = str(meta(dependent).get("namespace", ""))
        found = self._get(uid)
        owner = found[1] if found is not None else self._lookup(ref, namespace)
        if owner is None:
            return "unknown"  # a kind we cannot resolve: leave the dependent alone
        if owner == {} or meta(owner).get("uid") != uid:
            return "dangling"
        if meta(owner).get("namespace", "") not in ("", namespace):
            return "dangling"
        return "waiting" if _deleting_with(owner, FOREGROUND) else "solid"

    def _lookup(self, ref: OwnerReference, namespace: str) -> KubeObject | None:
        """The owner from the API server: {} when absent, None when its kind cannot be resolved."""
        resource = self._resource(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if resource is None:
            return None
        plural, namespaced = resource
        path = object_path(str(ref.get("apiVersion")), plural, namespace if namespaced else None, str(ref.get("name")))
        try:
            return cast(KubeObject, self.http.get(path))
        except KubeError as exc:
            if exc.code == 404:
                return {}
            raise

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        known = next((k for k in WATCHED if k.api_version == api_version and k.kind == kind), None)
        if known is not None:
            return known.plural, known.namespaced
        if (api_version, kind) not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                listed = self.http.get(base).get("resources") or []
            except KubeError:
                listed = []
            match = next((r for r in listed if r.get("kind") == kind and "/" not in str(r.get("name"))), None)
            self._resources[(api_version, kind)] = (
                (str(match["name"]), bool(match.get("namespaced"))) if match else None
            )
        return self._resources[(api_version, kind)]

    def _deleting_dependents(self, uid: str) -> None:
        found = self._get(uid)
        if found is None or not _deleting_with(found[1], FOREGROUND):
            return
        kind, owner = found
        blocking = []
        for _kind, dependent in self._dependents_of(uid):
            refs = meta(dependent).get("ownerReferences") or []
            if any(str(r.get("uid")) == uid and r.get("blockOwnerDeletion") for r in refs):
                blocking.append(dependent)
            if not meta(dependent).get("deletionTimestamp") or _deleting_with(dependent, FOREGROUND):
                self.queue.add(f"delete:{meta(dependent).get('uid')}")
        if not blocking:
            self._remove_finalizer(kind, owner, FOREGROUND)

    def _orphan(self, uid: str) -> None:
        found = self._get(uid)
        if found is None or not _deleting_with(found[1], ORPHAN):
            return
        kind, owner = found
        for dep_kind, dependent in self._dependents_of(uid):
            keep = [r for r in meta(dependent).get("ownerReferences") or [] if str(r.get("uid")) != uid]
            self.patch_meta(
                dependent, dep_kind.api_version, dep_kind.plural, {"ownerReferences": keep}, self.caches[dep_kind]
            )
        self._remove_finalizer(kind, owner, ORPHAN)

    def _remove_finalizer(self, kind: Kind, obj: KubeObject, finalizer: str) -> None:
        remaining = [f for f in _finalizers(obj) if f != finalizer]
        try:
            self.patch_meta(obj, kind.api_version, kind.plural, {"finalizers": remaining or None}, self.caches[kind])
        except KubeError as exc:
            if exc.code != 404:
                raise
