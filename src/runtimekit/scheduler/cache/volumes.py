"""The live scheduler's storage objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses
and CSINodes as the informers deliver them (watched only while a configured plugin reads them, its
`Watches`), and what PreBind plugins do with them.

- `VolumeStore`: the objects by key; `frozen()` hands a session an immutable `VolumeCatalog`, copied
  only when something changed since the last one; `wait` lets a binder thread sleep until the next
  change (PreBind waits for the PV controller and provisioners that way, not by polling).
- `LiveVolumes`: the `VolumeAccess` PreBind plugins get on their bindings: writes through the
  API server (`VolumeWriter`, the scheduler's `KubeBinder`), reads of the store, node labels and
  whether the pod still exists, from the cluster cache.

Thread-safe: informer threads write, the scheduling thread and binder threads read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Protocol, cast

from runtimekit.kube.objects import CSINode, KubeObject, PersistentVolume, PersistentVolumeClaim, StorageClass, meta
from runtimekit.model import NodeName, PodKey
from runtimekit.scheduler.kubesem.volumes import EMPTY_CATALOG, VolumeCatalog

CLAIMS, VOLUMES, CLASSES, CSINODES = "persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes"
# the kinds a plugin may ask to watch (`Watches`), with the path the informer lists
PATHS = {
    CLAIMS: "/api/v1/persistentvolumeclaims",
    VOLUMES: "/api/v1/persistentvolumes",
    CLASSES: "/apis/storage.k8s.io/v1/storageclasses",
    CSINODES: "/apis/storage.k8s.io/v1/csinodes",
}


class VolumeStore:
    """See the module docstring."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, KubeObject]] = {kind: {} for kind in PATHS}
        self._version = 0
        self._frozen = EMPTY_CATALOG
        self._changed = threading.Condition()
        self._closed = False

    def apply(self, resource: str, kind: str, obj: KubeObject) -> None:
        """An informer event (`kind` ADDED, MODIFIED or DELETED) of one of the `PATHS` resources."""
        object_meta = meta(obj)
        name = str(object_meta.get("name", ""))
        key = f"{object_meta.get('namespace', '')}/{name}" if resource == CLAIMS else name
        with self._changed:
            objects = self._objects[resource]
            if kind == "DELETED":
                if objects.pop(key, None) is None:
                    return
            else:
                objects[key] = obj
            self._version += 1
            self._changed.notify_all()

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def frozen(self) -> VolumeCatalog:
        """The objects as a catalog, the same object until something changes."""
        with self._changed:
            if self._frozen.version != self._version:
                objects = self._objects
                self._frozen = VolumeCatalog(
                    cast("dict[str, PersistentVolumeClaim]", dict(objects[CLAIMS])),
                    cast("dict[str, PersistentVolume]", dict(objects[VOLUMES])),
                    cast("dict[str, StorageClass]", dict(objects[CLASSES])),
                    cast("dict[str, CSINode]", dict(objects[CSINODES])),
                    self._version,
                )
            return self._frozen

    def wait(self, version: int, timeout: float) -> bool:
        """Block until the version moves past `version`, or `timeout` seconds pass; False once closed."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._version <= version and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return not self._closed

    def close(self) -> None:
        """The scheduler stops: waits end at once (and from now on)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class VolumeWriter(Protocol):
    """How PreBind's writes reach the API server (the scheduler's `KubeBinder`)."""

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume: ...

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim: ...


class ClusterView(Protocol):
    """What `LiveVolumes` reads of the cluster cache."""

    def node_labels(self, node: NodeName) -> Mapping[str, str] | None: ...

    def pod_known(self, key: PodKey) -> bool: ...


class LiveVolumes:
    """The live scheduler's `VolumeAccess` (see the module docstring)."""

    def __init__(self, store: VolumeStore, cluster: ClusterView, writer: VolumeWriter) -> None:
        self.store, self.cluster, self.writer = store, cluster, writer

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume:
        return self.writer.update_volume(volume)

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        return self.writer.update_claim(claim)

    def catalog(self) -> VolumeCatalog:
        return self.store.frozen()

    def node_labels(self, node: str) -> Mapping[str, str] | None:
        return self.cluster.node_labels(NodeName(node))

    def pod_exists(self, key: PodKey) -> bool:
        return self.cluster.pod_known(key)

    def wait(self, version: int, timeout: float) -> bool:
        return self.store.wait(version, timeout)
