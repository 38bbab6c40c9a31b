"""The bindings the scheduler has decided but the informers have not shown yet (kube-scheduler's PV
and PVC assume caches), and a session's view of the storage objects with them laid over.

- `AssumedVolumes`: per volume and per claim, the object as assumed (a volume bound to a claim in
  Reserve, a claim given its node) and the resourceVersion of the object it was made from. An
  assumption holds while the informers show that version (or none newer); once they show a newer
  one, the API object wins, as in kube's assume cache. `assume` refuses an object the informers
  do not know, or one older than what they show ("version out of sync"); `restore` drops an
  assumption (Unreserve, a failed bind). Shared by the plugins built with one context and across
  sessions; thread-safe (Reserve runs on the scheduling thread, Unreserve and PreBind on binder
  threads).
- `VolumeView`: a `VolumeLookup` over a catalog with the assumptions laid over, for one session
  (or one PreBind check).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from runtimekit.kube.objects import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass, meta
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.state import StateKey
from runtimekit.scheduler.kubesem.volumes import VolumeCatalog, resource_version


class AssumeError(Exception):
    """An assumption refused (the object is unknown, or the informers show a newer version)."""


Obj = TypeVar("Obj", PersistentVolume, PersistentVolumeClaim)


def claim_key(claim: PersistentVolumeClaim) -> str:
    return f"{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"


def volume_key(volume: PersistentVolume) -> str:
    return str(meta(volume).get("name", ""))


class _Table(Generic[Obj]):
    """Assumed objects of one kind by key, with the resourceVersion each was made from."""

    def __init__(self, lock: threading.Lock) -> None:
        self.entries: dict[str, tuple[Obj, int]] = {}
        self.lock = lock

    def read(self, key: str, api: Obj | None) -> Obj | None:
        """The assumed object while the API object is not newer than what it was made from, else the API's."""
        with self.lock:
            entry = self.entries.get(key)
        if entry is not None and api is not None and resource_version(api) <= entry[1]:
            return entry[0]
        return api

    def assume(self, key: str, api: Obj | None, new: Obj) -> None:
        latest = self.read(key, api)
        if api is None or latest is None:
            raise AssumeError(f"{key!r} not found")
        if resource_version(new) < resource_version(latest):
            raise AssumeError(
                f"{key!r} is out of sync: version {resource_version(new)} assumed, {resource_version(latest)} known"
            )
        with self.lock:
            self.entries[key] = (new, resource_version(api))

    def restore(self, key: str) -> None:
        with self.lock:
            self.entries.pop(key, None)

    def prune(self, api: Callable[[str], Obj | None]) -> None:
        with self.lock:
            stale = [k for k, (_, base) in self.entries.items() if (a := api(k)) is None or resource_version(a) > base]
            for key in stale:
                del self.entries[key]


class AssumedVolumes:
    """See the module docstring."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self._volumes: _Table[PersistentVolume] = _Table(lock)
        self._claims: _Table[PersistentVolumeClaim] = _Table(lock)
        self._lock = lock

    def __len__(self) -> int:
        with self._lock:
            return len(self._volumes.entries) + len(self._claims.entries)

    @property
    def empty(self) -> bool:
        """Whether nothing is assumed (two dict sizes read without the lock: a race only makes a
        reader look at the tables for nothing, or miss an assumption made at that very moment on
        another thread, as a read just before it would)."""
        return not self._volumes.entries and not self._claims.entries

    def volume(self, catalog: VolumeCatalog, name: str) -> PersistentVolume | None:
        return self._volumes.read(name, catalog.volume(name))

    def claim(self, catalog: VolumeCatalog, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self._claims.read(f"{namespace}/{name}", catalog.claim(namespace, name))

    def assume_volume(self, catalog: VolumeCatalog, volume: PersistentVolume) -> None:
        """Hold `volume` as assumed; raises AssumeError (kube's `Assume`)."""
        name = volume_key(volume)
        self._volumes.assume(name, catalog.volume(name), volume)

    def assume_claim(self, catalog: VolumeCatalog, claim: PersistentVolumeClaim) -> None:
        key = claim_key(claim)
        self._claims.assume(key, catalog.claims.get(key), claim)

    def restore_volume(self, name: str) -> None:
        self._volumes.restore(name)

    def restore_claim(self, key: str) -> None:
        self._claims.restore(key)

    def prune(self, catalog: VolumeCatalog) -> None:
        """Drop the assumptions the informers have caught up with (or whose object is gone)."""
        self._volumes.prune(catalog.volume)
        self._claims.prune(catalog.claims.get)


class VolumeView:
    """A catalog with the assumptions laid over (a `VolumeLookup`)."""

    def __init__(self, catalog: VolumeCatalog, assumed: AssumedVolumes) -> None:
        self.catalog, self.assumed = catalog, assumed

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        if self.assumed.empty:
            return self.catalog.claim(namespace, name)
        return self.assumed.claim(self.catalog, namespace, name)

    def volume(self, name: str) -> PersistentVolume | None:
        if self.assumed.empty:
            return self.catalog.volume(name)
        return self.assumed.volume(self.catalog, name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.catalog.storage_class(name)

    def csinode(self, node: str) -> CSINode | None:
        return self.catalog.csinode(node)

    def volumes_of_class(self, name: str) -> list[PersistentVolume]:
        if self.assumed.empty:
            return self.catalog.volumes_of_class(name)
        found = (self.assumed.volume(self.catalog, v) for v in self.catalog.by_class.get(name, ()))
        return [v for v in found if v is not None]


_SHARED: StateKey[AssumedVolumes] = StateKey("volumes/assumed")


def shared_assumptions(context: BuildContext) -> AssumedVolumes:
    """The assumptions of the plugins built with `context` (kept across sessions and conf reloads)."""
    found = context.shared.get(_SHARED)
    if found is None:
        found = AssumedVolumes()
        context.shared.write(_SHARED, found)
    return found
