"""What the scheduler reads of Dynamic Resource Allocation: `DraCatalog`, the ResourceClaims,
DeviceClasses and ResourceSlices as the informers last delivered them (frozen per session, with
the slices indexed once as `DevicePools`), and `pod_claims`, which claims a pod uses, as
kube-scheduler's DynamicResources plugin resolves them in PreFilter: a claim named directly, or the
claim the template controller made (`status.resourceClaimStatuses`), waited for until it exists.

Callers: the `dynamicresources` plugin (`plugins/dra.py`), the live cache (`cache/dra.py`).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from runtimekit.kube.objects import DeviceClass, Pod, ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.draalloc import DeviceKey, DevicePools
from runtimekit.scheduler.kubesem.draholdings import Holdings
from runtimekit.scheduler.kubesem.draledger import uuid_devices


@dataclass(frozen=True, eq=False)
class DraCatalog:
    """One version of the DRA objects: claims by namespace/name, classes by name, every slice."""

    claims: Mapping[str, ResourceClaim] = field(default_factory=dict)
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    slices: tuple[ResourceSlice, ...] = ()
    version: int = 0
    indexed: DevicePools | None = None  # `slices` indexed already (the store's, kept while no slice changes)
    holdings: Holdings | None = None  # what `claims` hold, read against `indexed` (the store's tracker)

    @cached_property
    def pools(self) -> DevicePools:
        """The slices indexed (the allocator's selector memo lives there too): `indexed`, else once per
        version."""
        return self.indexed if self.indexed is not None else DevicePools(self.slices)

    @cached_property
    def held(self) -> Holdings:
        """What the allocated claims hold (devices per pool, GPU uses per UUID): `holdings` where the
        store kept them up to date, else read once per version."""
        return self.holdings if self.holdings is not None else Holdings.of(self.claims, self.pools)

    @cached_property
    def by_uuid(self) -> Mapping[str, tuple[DeviceKey, ...]]:
        """Devices with a `uuid` attribute by that UUID (what the GPU ledger is matched with), read
        once per indexed slices."""
        pools = self.pools
        found = _UUIDS.get(pools)
        if found is None:
            found = _UUIDS[pools] = uuid_devices(pools)
        return found


_UUIDS: weakref.WeakKeyDictionary[DevicePools, dict[str, tuple[DeviceKey, ...]]] = weakref.WeakKeyDictionary()


EMPTY_DRA = DraCatalog()


@dataclass(frozen=True)
class PodClaims:
    """A pod's claims: their keys (namespace/name) in `spec.resourceClaims` order, or why the pod
    waits for one (`waiting`: the claim of a template not made yet, or a claim not there)."""

    keys: tuple[str, ...] = ()
    waiting: str = ""


def pod_claims(pod: Pod, claims: Mapping[str, ResourceClaim]) -> PodClaims:
    """See the module docstring; a template whose status names no claim (`resourceClaimName`
    null: the claim is not needed) is left out, as kube does."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace", "") or "default"
    made = {
        s.get("name", ""): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    keys: list[str] = []
    for entry in spec.get("resourceClaims") or []:
        name = entry.get("resourceClaimName")
        if not name and entry.get("resourceClaimTemplateName"):
            if entry.get("name", "") not in made:
                return PodClaims(waiting=f'waiting for resource claim of "{entry.get("name", "")}" to be created')
            name = made[entry.get("name", "")]
            if not name:
                continue
        if not name:
            continue
        key = f"{namespace}/{name}"
        if key not in claims:
            return PodClaims(waiting=f'resourceclaim "{name}" not found')
        keys.append(key)
    return PodClaims(tuple(keys))
