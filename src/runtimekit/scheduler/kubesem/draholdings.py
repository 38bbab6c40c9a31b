"""What allocated ResourceClaims hold, as the `dynamicresources` plugin reads it for every node it
tries: the devices in use per pool (`InUseByPool`, for the structured allocator) and what each
allocation takes of GPUs with a `uuid` attribute, by UUID (`GpuUse`, for the ledger shared with the
device plugin).

`Holdings.of` reads every claim. `HoldingsTracker` keeps one up to date across versions of the claims
(the store's, one per catalog version): a claim is read again only when its object changed (the
store replaces a claim's object on every event; none is changed in place), and only the pools and
GPUs of changed claims are merged again, so a binding that writes one claim costs the same however
many claims the cluster holds. Each version's mappings are new; earlier versions stay as they were.
Not thread-safe on its own (the DRA store calls it under its lock). Callers: `DraCatalog`, the DRA store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runtimekit.kube.objects import ResourceClaim
from runtimekit.kube.semantics.draalloc import DevicePools, InUse, InUseByPool
from runtimekit.scheduler.kubesem.draledger import GpuUse, gpu_uses

PoolKey = tuple[str, str]  # driver, pool


@dataclass(frozen=True)
class Holdings:
    """One version: devices in use per pool and GPU uses per UUID, of the allocated claims."""

    in_use: InUseByPool = field(default_factory=InUseByPool)
    uses: Mapping[str, tuple[GpuUse, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Mapping[str, ResourceClaim], pools: DevicePools) -> Holdings:
        return HoldingsTracker().read(claims, pools)


@dataclass(frozen=True)
class _Reading:
    claim: ResourceClaim  # the object read (a changed claim is a new object)
    parts: Mapping[PoolKey, InUse]
    uses: tuple[GpuUse, ...]


class HoldingsTracker:
    """See the module docstring."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, pools: DevicePools | None) -> None:
        self._pools = pools
        self._readings: dict[str, _Reading] = {}
        self._pool_claims: dict[PoolKey, set[str]] = {}
        self._uuid_claims: dict[str, set[str]] = {}
        self._last = Holdings()

    def read(self, claims: Mapping[str, ResourceClaim], pools: DevicePools) -> Holdings:
        """The holdings of `claims`; GPU uses are read against `pools` (new pools: all read again)."""
        if pools is not self._pools:
            self._reset(pools)
        changed = [k for k, claim in claims.items() if (r := self._readings.get(k)) is None or r.claim is not claim]
        gone = self._readings.keys() - claims.keys()
        if not changed and not gone:
            return self._last
        pools_touched: set[PoolKey] = set()
        uuids_touched: set[str] = set()
        for key in [*gone, *changed]:
            old = self._readings.pop(key, None)
            if old is not None:
                self._forget(key, old, pools_touched, uuids_touched)
        for key in changed:
            reading = _read(claims[key], pools)
            self._readings[key] = reading
            for pool in reading.parts:
                self._pool_claims.setdefault(pool, set()).add(key)
                pools_touched.add(pool)
            for use in reading.uses:
                self._uuid_claims.setdefault(use.uuid, set()).add(key)
                uuids_touched.add(use.uuid)
        parts = dict(self._last.in_use.parts)
        for pool in pools_touched:
            holders = sorted(self._pool_claims.get(pool, ()))
            if holders:
                parts[pool] = InUse.merged(self._readings[k].parts[pool] for k in holders)
            else:
                parts.pop(pool, None)
        uses = dict(self._last.uses)
        for uuid in uuids_touched:
            holders = sorted(self._uuid_claims.get(uuid, ()))
            found = tuple(u for k in holders for u in self._readings[k].uses if u.uuid == uuid)
            if found:
                uses[uuid] = found
            else:
                uses.pop(uuid, None)
        self._last = Holdings(InUseByPool(parts), uses)
        return self._last

    def _forget(self, key: str, old: _Reading, pools_touched: set[PoolKey], uuids_touched: set[str]) -> None:
        for pool in old.parts:
            holders = self._pool_claims.get(pool)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._pool_claims[pool]
            pools_touched.add(pool)
        for use in old.uses:
            holders = self._uuid_claims.get(use.uuid)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._uuid_claims[use.uuid]
            uuids_touched.add(use.uuid)


def _read(claim: ResourceClaim, pools: DevicePools) -> _Reading:
    allocation = (claim.get("status") or {}).get("allocation")
    if allocation is None:
        return _Reading(claim, {}, ())
    return _Reading(claim, InUseByPool.of([claim]).parts, tuple(gpu_uses(allocation, pools)))
