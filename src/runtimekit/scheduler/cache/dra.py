"""The live scheduler's Dynamic Resource Allocation objects: ResourceClaims, DeviceClasses and
ResourceSlices as the informers deliver them (watched only while the `dynamicresources` plugin is
configured; on a server without `resource.k8s.io` the informers find nothing and cost nothing),
and how PreBind writes a claim's status.

- `DraStore`: the objects by key; `frozen()` hands a session an immutable `DraCatalog`, made again
  only when something changed since the last one; `pools()` the slices indexed, made again only when
  a slice changed (what the cache's claim book reads devices from, `claimbook.py`).
- `LiveClaims`: the `ClaimAccess` PreBind gets on its bindings: the latest claim, and PUTs of
  `status` through the API server.

Thread-safe: informer threads write, the scheduling thread and binder threads read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Protocol, cast

from runtimekit.kube.objects import DeviceClass, KubeObject, ResourceClaim, ResourceSlice, meta
from runtimekit.kube.semantics.draalloc import DevicePools
from runtimekit.scheduler.kubesem.dra import EMPTY_DRA, DraCatalog
from runtimekit.scheduler.kubesem.draholdings import HoldingsTracker

CLAIMS, CLASSES, SLICES = "resourceclaims", "deviceclasses", "resourceslices"
GROUP = "/apis/resource.k8s.io/v1"
PATHS = {CLAIMS: f"{GROUP}/resourceclaims", CLASSES: f"{GROUP}/deviceclasses", SLICES: f"{GROUP}/resourceslices"}


class DraStore:
    """See the module docstring."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, KubeObject]] = {kind: {} for kind in PATHS}
        self._version = 0
        self._frozen = EMPTY_DRA
        self._slices_version = 0
        self._pools: tuple[int, DevicePools] = (-1, DevicePools(()))
        self._holdings = HoldingsTracker()
        self._lock = threading.Lock()

    def apply(self, resource: str, kind: str, obj: KubeObject) -> None:
        """An informer event (`kind` ADDED, MODIFIED or DELETED) of one of the `PATHS` resources."""
        object_meta = meta(obj)
        name = str(object_meta.get("name", ""))
        key = f"{object_meta.get('namespace', '')}/{name}" if resource == CLAIMS else name
        with self._lock:
            objects = self._objects[resource]
            if kind == "DELETED":
                if objects.pop(key, None) is None:
                    return
            else:
                objects[key] = obj
            self._version += 1
            if resource == SLICES:
                self._slices_version += 1

    def frozen(self) -> DraCatalog:
        """The objects as a catalog, the same object until something changes."""
        with self._lock:
            if self._frozen.version != self._version:
                objects = self._objects
                claims = cast("dict[str, ResourceClaim]", dict(objects[CLAIMS]))
                pools = self._indexed()  # a claim's change keeps the slices' index and its selector memo
                self._frozen = DraCatalog(
                    claims,
                    cast("dict[str, DeviceClass]", dict(objects[CLASSES])),
                    tuple(cast("ResourceSlice", objects[SLICES][k]) for k in sorted(objects[SLICES])),
                    self._version,
                    pools,
                    self._holdings.read(claims, pools),  # only the claims changed since are read again
                )
            return self._frozen

    def pools(self) -> DevicePools:
        """The slices as last seen, indexed (the same object until a slice changes)."""
        with self._lock:
            return self._indexed()

    def _indexed(self) -> DevicePools:
        if self._pools[0] != self._slices_version:
            slices = self._objects[SLICES]
            self._pools = (self._slices_version, DevicePools(cast("ResourceSlice", slices[k]) for k in sorted(slices)))
        return self._pools[1]

    def claims(self) -> Mapping[str, ResourceClaim]:
        """The claims by namespace/name as last seen: the store's own map, to read under the cache's
        lock (every write comes through the cache's handler, under that lock)."""
        return cast("dict[str, ResourceClaim]", self._objects[CLAIMS])

    def claim(self, key: str) -> ResourceClaim | None:
        with self._lock:
            return cast("ResourceClaim | None", self._objects[CLAIMS].get(key))


class StatusWriter(Protocol):
    """How PreBind's writes reach the API server (the scheduler's `KubeHttp`)."""

    def put(self, path: str, body: Mapping[str, object]) -> object: ...


class LiveClaims:
    """The live scheduler's `ClaimAccess` (see the module docstring)."""

    def __init__(
        self, store: DraStore, http: StatusWriter, apply: Callable[[str, KubeObject], None] | None = None
    ) -> None:
        self.store, self.http = store, http
        # how a written claim is taken in at once: the cache's claims handler (it books the allocation
        # in the GPU ledger as the informer's event would), or the store alone
        self.apply = apply if apply is not None else (lambda kind, obj: store.apply(CLAIMS, kind, obj))

    def claim(self, key: str) -> ResourceClaim | None:
        return self.store.claim(key)

    def update_status(self, claim: ResourceClaim) -> ResourceClaim:
        claim_meta = meta(claim)
        path = (
            f"{GROUP}/namespaces/{claim_meta.get('namespace', '')}/resourceclaims/{claim_meta.get('name', '')}/status"
        )
        answer = cast("ResourceClaim", self.http.put(path, dict(claim)))
        self.apply("MODIFIED", cast("KubeObject", answer))  # read-your-writes: the next PreBind sees it at once
        return answer
