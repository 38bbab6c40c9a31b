"""Volcano's queue quotas over DRA devices (the `capacity` plugin with
`capacity.DynamicResourceAllocationEnable`; Volcano's docs "DeviceClass Quota"): what a pod's claims
ask of each DeviceClass, what a queue may hold, and what it holds, a shared claim counted once.

- A queue names its DRA quota in `spec.capability` with two key forms: `deviceclass/<class>` (how many
  devices of the class) and `<dimension>.deviceclass/<class>` (how much of a consumable capacity,
  e.g. `memory.deviceclass/gpu.example.com: 80Gi`). `parse_limits` reads them; a count of 0 (or a
  class with dimension keys only) sets no count limit.
- What a claim asks (`claim_demand`): per DeviceClass of its `exactly` requests, the device count
  (`count`, 1 when unset) and, per `capacity.requests` dimension, the amount times that count.
  `firstAvailable` requests and `allocationMode: All` are not counted, as in Volcano. A pod's claims
  (`pod_demands`) are the ones it names directly or through `status.resourceClaimStatuses`; a claim
  not made or not seen yet counts nothing.
- `QueueClaims` is what a queue holds: claims are counted once however many of its pods share them
  (a reference count per claim), and `new_part` is what a pod would add.
- `exceeded` says why holding more would pass a limit ("" when it fits): a class the queue does not
  name passes; a count is checked where set; with consumable capacity on, every dimension the request
  asks for must be named and within its limit.
- `status_entries` is what Volcano writes into a queue's `status.allocated` for it.
Pure data and functions; callers: the `capacity` plugin, the cluster cache (queue status).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from runtimekit.kube.objects import Pod, ResourceClaim, meta
from runtimekit.kube.semantics.podclaims import pod_claims
from runtimekit.kube.semantics.quantity import parse_quantity, quantity_text

COUNT_PREFIX = "deviceclass/"
CAPACITY_SEP = ".deviceclass/"


@dataclass(frozen=True)
class DraAmount:
    """Devices of one class: how many, and how much of each consumable capacity."""

    count: int = 0
    capacity: Mapping[str, Fraction] = field(default_factory=dict)

    def plus(self, other: DraAmount) -> DraAmount:
        capacity = dict(self.capacity)
        for dim, amount in other.capacity.items():
            capacity[dim] = capacity.get(dim, Fraction(0)) + amount
        return DraAmount(self.count + other.count, capacity)

    def minus(self, other: DraAmount) -> DraAmount:
        """What is left, never below zero (Volcano's DRAResource.Sub)."""
        zero = Fraction(0)
        capacity = {dim: max(zero, amount - other.capacity.get(dim, zero)) for dim, amount in self.capacity.items()}
        return DraAmount(max(0, self.count - other.count), capacity)

    def times(self, n: int) -> DraAmount:
        return DraAmount(self.count * n, {dim: amount * n for dim, amount in self.capacity.items()})


Demand = dict[str, DraAmount]  # device class -> amount


def add_demand(total: Mapping[str, DraAmount], more: Mapping[str, DraAmount], times: int = 1) -> Demand:
    out = dict(total)
    for cls, amount in more.items():
        out[cls] = out.get(cls, DraAmount()).plus(amount.times(times) if times != 1 else amount)
    return out


def claim_demand(claim: ResourceClaim) -> Demand:
    """What the claim asks of each DeviceClass (see the module docstring)."""
    out: Demand = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly")
        if not exactly or request.get("firstAvailable"):
            continue
        cls = str(exactly.get("deviceClassName") or "")
        if not cls or exactly.get("allocationMode") == "All":
            continue
        count = int(exactly.get("count") or 0) or 1
        try:
            capacity = {
                str(dim): parse_quantity(value) * count
                for dim, value in ((exactly.get("capacity") or {}).get("requests") or {}).items()
            }
        except ValueError:  # the API server validates quantities; an unreadable one counts nothing
            capacity = {}
        out[cls] = out.get(cls, DraAmount()).plus(DraAmount(count, capacity))
    return out


def pod_demands(pod: Pod, claims: Mapping[str, ResourceClaim]) -> dict[str, Demand]:
    """Per claim the pod uses (`<namespace>/<name>`, in name order), what it asks; claims that ask
    nothing countable, or are not made or seen yet, are left out."""
    namespace = str(meta(pod).get("namespace", "default"))
    out: dict[str, Demand] = {}
    for name in sorted({n for n in pod_claims(pod).values() if n}):
        key = f"{namespace}/{name}"
        claim = claims.get(key)
        demand = claim_demand(claim) if claim is not None else {}
        if demand:
            out[key] = demand
    return out


def total_demand(demands: Mapping[str, Demand]) -> Demand:
    """Every claim's demand added up (per pod: a claim its pods share counts for each of them)."""
    out: Demand = {}
    for demand in demands.values():
        out = add_demand(out, demand)
    return out


@dataclass(frozen=True)
class DraLimit:
    """A queue's quota of one DeviceClass: a device count (0: none) and consumable-capacity limits."""

    count: int = 0
    capacity: Mapping[str, Fraction] = field(default_factory=dict)


def is_dra_key(name: str) -> bool:
    return name.startswith(COUNT_PREFIX) or name.find(CAPACITY_SEP) > 0


def parse_limits(resources: Mapping[str, object] | None) -> dict[str, DraLimit]:
    """The DRA keys of a ResourceList (a queue's capability) by DeviceClass; other keys, empty parts and
    unreadable quantities are left out."""
    counts: dict[str, int] = {}
    capacities: dict[str, dict[str, Fraction]] = {}
    for key, value in (resources or {}).items():
        name = str(key)
        try:
            if name.startswith(COUNT_PREFIX):
                cls = name[len(COUNT_PREFIX) :]
                if cls:
                    counts[cls] = math.ceil(parse_quantity(value))
            elif name.find(CAPACITY_SEP) > 0:
                dim, cls = name.split(CAPACITY_SEP, 1)
                if dim and cls:
                    capacities.setdefault(cls, {})[dim] = parse_quantity(value)
        except ValueError:
            continue
    return {cls: DraLimit(counts.get(cls, 0), capacities.get(cls, {})) for cls in sorted({*counts, *capacities})}


def exceeded(
    limits: Mapping[str, DraLimit],
    held: Mapping[str, DraAmount],
    request: Mapping[str, DraAmount],
    consumable: bool,
    inqueue: Mapping[str, DraAmount] | None = None,
) -> str:
    """Why `held` (plus `inqueue`) plus `request` passes a limit, "" when it does not (Volcano's
    checkDRAAllocatable)."""
    for cls, asked in sorted(request.items()):
        limit = limits.get(cls)
        if limit is None:
            continue  # a class the queue does not name is not limited
        has = held.get(cls, DraAmount()).plus((inqueue or {}).get(cls, DraAmount()))
        if limit.count > 0 and has.count + asked.count > limit.count:
            return f"{COUNT_PREFIX}{cls}: {has.count} held and {asked.count} asked, capability {limit.count}"
        if not consumable:
            continue
        for dim, amount in sorted(asked.capacity.items()):
            cap = limit.capacity.get(dim)
            key = f"{dim}{CAPACITY_SEP}{cls}"
            if cap is None:
                return f"{key}: asked but the queue's capability does not name it"
            if has.capacity.get(dim, Fraction(0)) + amount > cap:
                held_amount = _text(has.capacity.get(dim, Fraction(0)))
                return f"{key}: {held_amount} held and {_text(amount)} asked, capability {_text(cap)}"
    return ""


@dataclass
class QueueClaims:
    """What a queue holds of DRA devices, each claim counted once (a reference count per claim)."""

    allocated: Demand = field(default_factory=dict)
    refs: dict[str, int] = field(default_factory=dict)

    def new_part(self, demands: Mapping[str, Demand]) -> Demand:
        """What holding these claims would add: the claims not held yet."""
        out: Demand = {}
        for key, demand in demands.items():
            if not self.refs.get(key):
                out = add_demand(out, demand)
        return out

    def add(self, demands: Mapping[str, Demand], only: Mapping[str, object] | None = None) -> None:
        """Hold the claims of one more pod (with `only`, just the classes it names)."""
        for key, demand in demands.items():
            if not self.refs.get(key):
                kept = demand if only is None else {c: a for c, a in demand.items() if c in only}
                self.allocated = add_demand(self.allocated, kept)
            self.refs[key] = self.refs.get(key, 0) + 1

    def remove(self, demands: Mapping[str, Demand]) -> None:
        """One pod fewer holds these claims; a claim's amount goes with its last pod."""
        for key, demand in demands.items():
            refs = self.refs.get(key, 0)
            if refs <= 1:
                for cls, amount in demand.items():
                    self.allocated[cls] = self.allocated.get(cls, DraAmount()).minus(amount)
                self.refs.pop(key, None)
            else:
                self.refs[key] = refs - 1


def status_entries(allocated: Mapping[str, DraAmount]) -> dict[str, str]:
    """The `status.allocated` keys Volcano writes for what a queue holds (zero amounts left out)."""
    out: dict[str, str] = {}
    for cls, amount in sorted(allocated.items()):
        if amount.count > 0:
            out[f"{COUNT_PREFIX}{cls}"] = str(amount.count)
        for dim, value in sorted(amount.capacity.items()):
            if value > 0:
                out[f"{dim}{CAPACITY_SEP}{cls}"] = _text(value)
    return out


def _text(amount: Fraction) -> str:
    return quantity_text(amount, binary=True)
