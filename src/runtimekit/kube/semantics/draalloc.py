"""The structured allocator of Dynamic Resource Allocation, as kube's
`dynamic-resource-allocation/structured` allocates a pod's claims on one node (what kube-scheduler's
DynamicResources plugin runs in Filter), pure and deterministic:

- the devices a node can reach: slices with `nodeName` equal to the node, `allNodes`, a `nodeSelector`
  matching the node's labels, or per device with `perDeviceNodeSelection`; per pool only the newest
  `generation`, and a pool with fewer slices than its `resourceSliceCount` is incomplete (skipped,
  and an error for a request of `allocationMode: All`);
- a request (`exactly`, or the first of `firstAvailable` that can be met) takes `count` devices
  (`ExactCount`, default 1) or every matching one (`All`), each passing its DeviceClass's selectors
  and its own (CEL, `dracel`), not in use by another claim (unless `adminAccess`), within the
  constraints of its claim (`matchAttribute`: all the same value; `distinctAttribute`: all differ);
- consumable capacity (KEP-5075): a device with `allowMultipleAllocations` is shared: each request
  consumes its `capacity.requests` (an amount not asked for is the policy's `default`, else all of it),
  rounded up by the capacity's `requestPolicy` (`validRange` min + n×step, `validValues`), within the
  capacity left; its result gets a `shareID` and `consumedCapacity`. On other devices a capacity
  request is a lower bound on what the device has;
- partitionable devices (KEP-4815): a device with `consumesCounters` fits while its counter sets
  (`sharedCounters` of any slice of its pool) have enough left after the devices in use and those chosen;
- search: requests in order, devices in pool order (driver, pool, slice, device), backtracking as
  kube does, so the first fitting choice in that order is the answer (the same input gives the same
  allocation). `AllocationResult`s carry the node selector of the devices (`metadata.name` of the
  node for node-local slices) and the class and claim configs (`FromClass`, `FromClaim`).

`allocate` answers the allocations (one per claim, in order) or None when the claims do not fit on
this node; `AllocationError` is what no node can fix (an unknown DeviceClass, a selector that does not
compile or fails, an `All` request on an incomplete pool). `InUse.of` reads what allocated claims
hold; `DevicePools` indexes the slices once for many nodes. Callers: the scheduler's DRA filter, the simulator, tests.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from runtimekit.kube.objects import (
    AllocationResult,
    CapacityRequestPolicy,
    Device,
    DeviceAllocationConfiguration,
    DeviceClass,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    ExactDeviceRequest,
    NodeSelector,
    ResourceClaim,
    ResourceSlice,
    ResourceSliceSpec,
    meta,
)
from runtimekit.kube.semantics import dracel
from runtimekit.kube.semantics.nodeaffinity import required_matches, selector_terms
from runtimekit.kube.semantics.quantity import parse_quantity, quantity_text

if TYPE_CHECKING:
    import cel

DeviceKey = tuple[str, str, str]  # driver, pool, device
CounterKey = tuple[str, str, str]  # driver, pool, counter set
NodeKey = tuple[str, tuple[tuple[str, str], ...]]  # a node's name and sorted labels
_REACH_LIMIT = 100_000  # nodes whose reach a DevicePools remembers
_VERDICT_LIMIT = 500_000  # selector verdicts a DevicePools remembers before it starts again
_BUDGET = 200_000  # devices tried before a search gives up (kube bounds its search by a timeout)
_SHARE_NAMESPACE = uuid.UUID("6f1d0c52-6a8e-4c59-9a55-3c3f5d3b2a10")


class AllocationError(Exception):
    """A claim no node can satisfy as written."""


@dataclass
class InUse:
    """What allocated claims hold: devices taken whole, capacity consumed on shared devices (by
    fully qualified capacity name) and counters consumed (by counter set)."""

    exclusive: set[DeviceKey] = field(default_factory=set)
    consumed: dict[DeviceKey, dict[str, Fraction]] = field(default_factory=dict)
    shared: set[DeviceKey] = field(default_factory=set)

    @classmethod
    def of(cls, claims: Iterable[ResourceClaim]) -> InUse:
        held = cls()
        for claim in claims:
            held.add((claim.get("status") or {}).get("allocation"))
        return held

    def add(self, allocation: AllocationResult | None) -> None:
        """Count what one allocation holds as well."""
        for result in ((allocation or {}).get("devices") or {}).get("results") or []:
            if result.get("adminAccess"):
                continue
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            if "shareID" in result or "consumedCapacity" in result:
                self.shared.add(key)
                used = self.consumed.setdefault(key, {})
                for name, amount in (result.get("consumedCapacity") or {}).items():
                    full = _qualify(name, key[0])
                    used[full] = used.get(full, Fraction(0)) + parse_quantity(amount)
            else:
                self.exclusive.add(key)

    def in_pools(self, pools: Iterable[tuple[str, str]]) -> InUse:
        """A copy holding only the devices of these (driver, pool)s: what one node's allocation reads
        (its candidates' devices, and their pools' counter sets). Reads every device held: for many
        nodes, `InUseByPool` keeps them by pool."""
        wanted = set(pools)
        return InUse(
            {k for k in self.exclusive if k[:2] in wanted},
            {k: dict(v) for k, v in self.consumed.items() if k[:2] in wanted},
            {k for k in self.shared if k[:2] in wanted},
        )

    @classmethod
    def merged(cls, parts: Iterable[InUse]) -> InUse:
        """A new one holding what all the parts hold."""
        out = cls()
        for part in parts:
            out.exclusive |= part.exclusive
            out.shared |= part.shared
            for key, amounts in part.consumed.items():
                used = out.consumed.setdefault(key, {})
                for name, amount in amounts.items():
                    used[name] = used.get(name, Fraction(0)) + amount
        return out


@dataclass(frozen=True)
class InUseByPool:
    """What allocated claims hold, kept per (driver, pool), so that one node's allocation merges only
    its pools' parts however many claims the cluster has; a part is never changed once made (a new
    version replaces the parts whose pools changed and shares the rest)."""

    parts: Mapping[tuple[str, str], InUse] = field(default_factory=dict)

    @classmethod
    def of(cls, claims: Iterable[ResourceClaim]) -> InUseByPool:
        return cls.split(InUse.of(claims))

    @classmethod
    def split(cls, in_use: InUse) -> InUseByPool:
        parts: dict[tuple[str, str], InUse] = {}
        for key in in_use.exclusive:
            parts.setdefault(key[:2], InUse()).exclusive.add(key)
        for key in in_use.shared:
            parts.setdefault(key[:2], InUse()).shared.add(key)
        for key, amounts in in_use.consumed.items():
            parts.setdefault(key[:2], InUse()).consumed[key] = dict(amounts)
        return cls(parts)

    def in_pools(self, pools: Iterable[tuple[str, str]]) -> InUse:
        """What the devices of these pools hold (a new `InUse`, the caller's to change)."""
        return InUse.merged(self.parts[p] for p in pools if p in self.parts)

    def with_allocations(self, allocations: Iterable[AllocationResult]) -> InUseByPool:
        """A new version holding also what these allocations hold."""
        held = InUse()
        for allocation in allocations:
            held.add(allocation)
        extra = InUseByPool.split(held)
        parts = dict(self.parts)
        for pool, part in extra.parts.items():
            parts[pool] = InUse.merged([parts[pool], part]) if pool in parts else part
        return InUseByPool(parts)


def _qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


@dataclass(frozen=True)
class _Candidate:
    key: DeviceKey
    device: Device
    slice_spec: ResourceSliceSpec
    counters: Mapping[str, Mapping[str, Fraction]]  # counter set -> counter -> value (the slice's)


@dataclass(frozen=True)
class _Alternative:
    result_name: str  # `request` or `request/subrequest`
    request_name: str
    spec: ExactDeviceRequest  # a DeviceSubRequest is read as one (it has no adminAccess)
    admin: bool


@dataclass(frozen=True)
class _Slot:
    claim: int
    alternatives: tuple[_Alternative, ...]


@dataclass
class _Pick:
    slot: int
    alternative: _Alternative
    candidate: _Candidate
    consumed: dict[str, Fraction] | None  # consumed capacity on a shared device


class _Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        pools: DevicePools,
        candidates: list[_Candidate],
        incomplete: set[tuple[str, str]],
        in_use: InUse,
        counters_used: dict[CounterKey, dict[str, Fraction]],
        node: NodeKey,
    ) -> None:
        self.claims, self.classes, self.pools, self.candidates = claims, classes, pools, candidates
        self.node = node  # the node's name and labels (the pools' memo of selected devices is by node)
        self.incomplete, self.in_use, self.counters_used = incomplete, in_use, counters_used
        self.slots = [_Slot(i, alts) for i, claim in enumerate(claims) for alts in _alternatives(claim)]
        self.picks: list[_Pick] = []
        self.budget = _BUDGET
        self._matching: dict[int, list[_Candidate]] = {}

    # -- matching -------------------------------------------------------------------------------
    def matching(self, alt: _Alternative) -> list[_Candidate]:
        cache_key = id(alt)  # the slots hold every alternative for the search's life
        found = self._matching.get(cache_key)
        if found is not None:
            return found
        class_name = str(alt.spec.get("deviceClassName", ""))
        device_class = self.classes.get(class_name)
        if device_class is None:
            raise AllocationError(f"request {alt.result_name}: device class {class_name} does not exist")
        selectors = [*((device_class.get("spec") or {}).get("selectors") or []), *(alt.spec.get("selectors") or [])]
        compiled = []
        for selector in selectors:
            expression = (selector.get("cel") or {}).get("expression", "")
            try:
                compiled.append(dracel.compile_selector(expression))
            except dracel.SelectorError as exc:
                raise AllocationError(f"request {alt.result_name}: selector {expression!r}: {exc}") from exc
        memo = (self.node, tuple(program.expression for program in compiled))
        keys = self.pools.selected.get(memo)  # the node's devices these selectors pick, worked out before
        if keys is None:
            picked = set()
            for candidate in self.candidates:
                try:
                    if all(self.pools.matches(program, candidate) for program in compiled):
                        picked.add(candidate.key)
                except dracel.SelectorError as exc:
                    message = f"request {alt.result_name}: device {'/'.join(candidate.key)}: {exc}"
                    raise AllocationError(message) from exc
            keys = self.pools.remember(memo, frozenset(picked))
        found = [candidate for candidate in self.candidates if candidate.key in keys]  # in the search's order
        self._matching[cache_key] = found
        return found

    # -- availability ---------------------------------------------------------------------------
    def _consumption(self, alt: _Alternative, candidate: _Candidate) -> tuple[bool, dict[str, Fraction] | None]:
        """Whether the device can take the request now, and what it consumes if it is shared."""
        device, key = candidate.device, candidate.key
        shared = device.get("allowMultipleAllocations")
        # a device in use answers no before its capacities are read (most of a full node's devices)
        if key in self.in_use.exclusive and not (alt.admin and not shared):
            return False, None
        if not shared and not alt.admin and key in self.in_use.shared:
            return False, None
        requests = {
            _qualify(n, key[0]): parse_quantity(v)
            for n, v in ((alt.spec.get("capacity") or {}).get("requests") or {}).items()
        }
        capacity = {_qualify(n, key[0]): c for n, c in (device.get("capacity") or {}).items()}
        if any(name not in capacity for name in requests):
            return False, None
        chosen_here = [p for p in self.picks if p.candidate.key == key]
        if not device.get("allowMultipleAllocations"):
            if alt.admin:  # admin access reaches a device whoever holds it
                return True, None
            if key in self.in_use.exclusive or key in self.in_use.shared or chosen_here:
                return False, None
            fits = all(amount <= parse_quantity(capacity[name].get("value", 0)) for name, amount in requests.items())
            return fits, None
        if key in self.in_use.exclusive:
            return False, None
        consumed: dict[str, Fraction] = {}
        for name, cap in capacity.items():
            total = parse_quantity(cap.get("value", 0))
            amount = _consumed(requests.get(name), total, cap.get("requestPolicy"))
            if amount is None:
                return False, None
            already = self.in_use.consumed.get(key, {}).get(name, Fraction(0))
            allocating = sum((p.consumed or {}).get(name, Fraction(0)) for p in chosen_here)
            if already + allocating + amount > total:
                return False, None
            consumed[name] = amount
        return True, consumed

    def _counters_fit(self, candidate: _Candidate) -> bool:
        for use in candidate.device.get("consumesCounters") or []:
            set_name = use.get("counterSet", "")
            have = candidate.counters.get(set_name)
            if have is None:
                return False
            ckey = (candidate.key[0], candidate.key[1], set_name)
            for counter, need in (use.get("counters") or {}).items():
                used = self.counters_used.get(ckey, {}).get(counter, Fraction(0))
                used += sum(
                    _counter_need(p.candidate, set_name, counter)
                    for p in self.picks
                    if p.candidate.key[:2] == candidate.key[:2]
                )
                if used + parse_quantity(need.get("value", 0)) > have.get(counter, Fraction(0)):
                    return False
        return True

    def _constraints_hold(self, slot: _Slot, alt: _Alternative, candidate: _Candidate) -> bool:
        devices = ((self.claims[slot.claim].get("spec") or {}).get("devices")) or {}
        for constraint in devices.get("constraints") or []:
            names = constraint.get("requests") or []
            if names and alt.request_name not in names and alt.result_name not in names:
                continue
            for field_name, same in (("matchAttribute", True), ("distinctAttribute", False)):
                attribute = str(constraint.get(field_name) or "")
                if not attribute:
                    continue
                mine = _attribute_of(candidate, attribute)
                if mine is None:
                    return False
                for pick in self.picks:
                    if self.slots[pick.slot].claim != slot.claim:
                        continue
                    if (
                        names
                        and pick.alternative.request_name not in names
                        and pick.alternative.result_name not in names
                    ):
                        continue
                    theirs = _attribute_of(pick.candidate, attribute)
                    if (theirs == mine) != same:
                        return False
        return True

    def _try(self, slot_index: int, alt: _Alternative, candidate: _Candidate) -> _Pick | None:
        self.budget -= 1
        if self.budget < 0:
            return None
        ok, consumed = self._consumption(alt, candidate)
        if not ok or not (alt.admin or self._counters_fit(candidate)):
            return None
        if not self._constraints_hold(self.slots[slot_index], alt, candidate):
            return None
        return _Pick(slot_index, alt, candidate, consumed)

    # -- search ---------------------------------------------------------------------------------
    def run(self, slot_index: int = 0) -> bool:
        if slot_index == len(self.slots):
            return True
        for alt in self.slots[slot_index].alternatives:
            candidates = self.matching(alt)
            if str(alt.spec.get("allocationMode") or "ExactCount") == "All":
                if self._all(slot_index, alt, candidates):
                    return True
            elif self._some(slot_index, alt, candidates, int(alt.spec.get("count") or 1), 0):
                return True
            if self.budget < 0:
                return False
        return False

    def _all(self, slot_index: int, alt: _Alternative, candidates: list[_Candidate]) -> bool:
        if any(c.key[:2] in self.incomplete for c in candidates):
            pool = next(c.key[1] for c in candidates if c.key[:2] in self.incomplete)
            raise AllocationError(
                f"request {alt.result_name}: asks for all devices, but resource pool {pool} is incomplete"
            )
        usable = [c for c in candidates if c.key[:2] not in self.incomplete]
        if not usable:
            return False
        mark = len(self.picks)
        for candidate in usable:
            pick = self._try(slot_index, alt, candidate)
            if pick is None:
                del self.picks[mark:]
                return False
            self.picks.append(pick)
        if self.run(slot_index + 1):
            return True
        del self.picks[mark:]
        return False

    def _some(self, slot_index: int, alt: _Alternative, candidates: list[_Candidate], left: int, start: int) -> bool:
        if left == 0:
            return self.run(slot_index + 1)
        for i in range(start, len(candidates)):
            candidate = candidates[i]
            if candidate.key[:2] in self.incomplete:
                continue
            pick = self._try(slot_index, alt, candidate)
            if pick is None:
                if self.budget < 0:
                    return False
                continue
            self.picks.append(pick)
            # a shared device may take the same request again; others are taken once
            again = i if candidate.device.get("allowMultipleAllocations") and not alt.admin else i + 1
            if self._some(slot_index, alt, candidates, left - 1, again):
                return True
            self.picks.pop()
        return False


def _counter_need(candidate: _Candidate, set_name: str, counter: str) -> Fraction:
    total = Fraction(0)
    for use in candidate.device.get("consumesCounters") or []:
        if use.get("counterSet") == set_name:
            total += parse_quantity(((use.get("counters") or {}).get(counter) or {}).get("value", 0))
    return total


def _attribute_of(candidate: _Candidate, qualified: str) -> object:
    domain, _, ident = qualified.rpartition("/")
    for name, value in (candidate.device.get("attributes") or {}).items():
        d, _, i = name.rpartition("/")
        if i == ident and (d or candidate.key[0]) == domain:
            return dracel.attribute_value(value)
    return None


def _consumed(asked: Fraction | None, total: Fraction, policy: CapacityRequestPolicy | None) -> Fraction | None:
    """What a request consumes of one capacity of a shared device, or None when the policy refuses it."""
    if asked is None:
        if policy and policy.get("default") is not None:
            return parse_quantity(policy["default"])
        return total
    if not policy:
        return asked
    valid_range = policy.get("validRange")
    if valid_range and valid_range.get("min") is not None:
        low = parse_quantity(valid_range["min"])
        amount = max(asked, low)
        if valid_range.get("step") is not None:
            step = parse_quantity(valid_range["step"])
            steps = -((low - amount) // step)  # ceil((amount - low) / step)
            amount = low + steps * step
        if valid_range.get("max") is not None and amount > parse_quantity(valid_range["max"]):
            return None
        return amount
    if policy.get("validValues"):
        values = sorted(parse_quantity(v) for v in policy["validValues"])
        return next((v for v in values if v >= asked), None)
    return asked


def _alternatives(claim: ResourceClaim) -> list[tuple[_Alternative, ...]]:
    slots = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = request.get("name", "")
        if request.get("firstAvailable"):
            alts = tuple(
                _Alternative(f"{name}/{sub.get('name', '')}", name, _as_exact(sub), False)
                for sub in request.get("firstAvailable") or []
            )
        else:
            exact = request.get("exactly") or {}
            alts = (_Alternative(name, name, exact, bool(exact.get("adminAccess"))),)
        slots.append(alts)
    return slots


def _as_exact(sub: DeviceSubRequest) -> ExactDeviceRequest:
    """A firstAvailable alternative read as an ExactDeviceRequest (its fields less the name)."""
    exact: ExactDeviceRequest = {"deviceClassName": sub.get("deviceClassName", "")}
    if "selectors" in sub:
        exact["selectors"] = sub["selectors"]
    if "allocationMode" in sub:
        exact["allocationMode"] = sub["allocationMode"]
    if "count" in sub:
        exact["count"] = sub["count"]
    if "tolerations" in sub:
        exact["tolerations"] = sub["tolerations"]
    if "capacity" in sub:
        exact["capacity"] = sub["capacity"]
    return exact


def _slice_reaches(spec: ResourceSliceSpec, node_name: str, labels: Mapping[str, str]) -> bool:
    if spec.get("nodeName"):
        return spec.get("nodeName") == node_name
    if spec.get("allNodes"):
        return True
    if spec.get("nodeSelector"):
        return required_matches((), selector_terms(spec.get("nodeSelector")), labels, node_name)
    return bool(spec.get("perDeviceNodeSelection"))


def _device_reaches(device: Device, spec: ResourceSliceSpec, node_name: str, labels: Mapping[str, str]) -> bool:
    if not spec.get("perDeviceNodeSelection"):
        return True
    own: ResourceSliceSpec = {"nodeName": device.get("nodeName", ""), "allNodes": device.get("allNodes", False)}
    if "nodeSelector" in device:
        own["nodeSelector"] = device["nodeSelector"]
    return _slice_reaches(own, node_name, labels)


@dataclass
class _Pool:
    key: tuple[str, str]
    slices: list[ResourceSliceSpec]  # the newest generation's, by slice name
    devices: list[list[_Candidate]]  # per slice
    complete: bool


class DevicePools:
    """A cluster's ResourceSlices indexed once (a scheduling session builds one and asks it per node):
    pools in kube's order with their newest generation, which pools each node's name reaches (the
    rest are looked at for every node), every device by key, and a memo of selector verdicts per
    device, so each device is matched against an expression once however many nodes and pods ask."""

    def __init__(self, slices: Iterable[ResourceSlice]) -> None:
        grouped: dict[tuple[str, str], list[ResourceSlice]] = {}
        for item in slices:
            spec = item.get("spec") or {}
            grouped.setdefault((spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")), []).append(item)
        self.pools: list[_Pool] = []
        self.everything: dict[DeviceKey, _Candidate] = {}
        self._by_node: dict[str, list[int]] = {}
        self._anywhere: list[int] = []
        self._verdicts: dict[tuple[str, DeviceKey], bool] = {}
        self._contexts: dict[DeviceKey, cel.Context] = {}
        self.selected: dict[tuple[NodeKey, tuple[str, ...]], frozenset[DeviceKey]] = {}  # see `remember`
        self._reached: dict[NodeKey, tuple[list[_Candidate], set[tuple[str, str]]]] = {}
        for pool_key in sorted(grouped):
            self._add(pool_key, grouped[pool_key])

    def _add(self, pool_key: tuple[str, str], items: list[ResourceSlice]) -> None:
        newest = max(self._generation_of(s) for s in items)
        current = sorted((s for s in items if self._generation_of(s) == newest), key=lambda s: meta(s).get("name", ""))
        specs = [s.get("spec") or {} for s in current]
        wanted = int((specs[0].get("pool") or {}).get("resourceSliceCount", 1) or 1)
        # a pool's counter sets, from whichever of its slices declares them (1.35 wants them in a slice
        # of their own; 1.34 in the devices' slice)
        counters = {
            cs.get("name", ""): {n: parse_quantity(c.get("value", 0)) for n, c in (cs.get("counters") or {}).items()}
            for spec in specs
            for cs in spec.get("sharedCounters") or []
        }
        devices = [
            [
                _Candidate((pool_key[0], pool_key[1], d.get("name", "")), d, spec, counters)
                for d in spec.get("devices") or []
            ]
            for spec in specs
        ]
        index = len(self.pools)
        self.pools.append(_Pool(pool_key, specs, devices, len(current) >= wanted))
        for row in devices:
            for candidate in row:
                self.everything[candidate.key] = candidate
        node_names = {spec.get("nodeName", "") for spec in specs if spec.get("devices")}
        if "" in node_names:
            self._anywhere.append(index)
        for name in node_names - {""}:
            self._by_node.setdefault(name, []).append(index)

    @staticmethod
    def _generation_of(item: ResourceSlice) -> int:
        return int(((item.get("spec") or {}).get("pool") or {}).get("generation", 0))

    @functools.cached_property
    def counters(self) -> bool:
        """Whether any device consumes counters (partitionable devices); without, none are counted."""
        return any(c.device.get("consumesCounters") for c in self.everything.values())

    @staticmethod
    def node_key(node_name: str, labels: Mapping[str, str]) -> NodeKey:
        """What the pools' memos of one node are keyed by: its name and labels."""
        return node_name, tuple(sorted(labels.items()))

    def remember(self, memo: tuple[NodeKey, tuple[str, ...]], keys: frozenset[DeviceKey]) -> frozenset[DeviceKey]:
        """Keep which of a node's devices a list of selectors picks (`selected`), bounded."""
        if len(self.selected) >= _VERDICT_LIMIT:
            self.selected.clear()
        self.selected[memo] = keys
        return keys

    def reach(
        self, node_name: str, labels: Mapping[str, str], key: NodeKey | None = None
    ) -> tuple[list[_Candidate], set[tuple[str, str]]]:
        """The devices the node reaches, in pool order, and the incomplete pools among theirs (worked
        out once per node name and labels; the caller's copies). `key`: `node_key`, if made already."""
        memo = key or self.node_key(node_name, labels)
        found = self._reached.get(memo)
        if found is None:
            if len(self._reached) >= _REACH_LIMIT:
                self._reached.clear()
            found = self._reached[memo] = self._reach(node_name, labels)
        return list(found[0]), set(found[1])

    def _reach(self, node_name: str, labels: Mapping[str, str]) -> tuple[list[_Candidate], set[tuple[str, str]]]:
        candidates: list[_Candidate] = []
        incomplete: set[tuple[str, str]] = set()
        for index in sorted({*self._by_node.get(node_name, ()), *self._anywhere}):
            pool = self.pools[index]
            reaches = False
            for spec, row in zip(pool.slices, pool.devices, strict=True):
                if not _slice_reaches(spec, node_name, labels):
                    continue
                for candidate in row:
                    if _device_reaches(candidate.device, spec, node_name, labels):
                        candidates.append(candidate)
                        reaches = True
            if reaches and not pool.complete:
                incomplete.add(pool.key)
        return candidates, incomplete

    def matches(self, selector: dracel.Selector, candidate: _Candidate) -> bool:
        """The selector's verdict on the device (SelectorError when it fails there), remembered."""
        memo = (selector.expression, candidate.key)
        verdict = self._verdicts.get(memo)
        if verdict is None:
            context = self._contexts.get(candidate.key)
            if context is None:
                variable = dracel.device_variable(candidate.key[0], candidate.device)
                context = self._contexts[candidate.key] = dracel.device_context(variable)
            if len(self._verdicts) >= _VERDICT_LIMIT:  # an index kept long meets ever new selectors
                self._verdicts.clear()
            verdict = self._verdicts[memo] = dracel.matches(selector, context)
        return verdict


def _counters_in_use(
    in_use: InUse, everything: Mapping[DeviceKey, _Candidate]
) -> dict[CounterKey, dict[str, Fraction]]:
    used: dict[CounterKey, dict[str, Fraction]] = {}
    for key in sorted(in_use.exclusive | in_use.shared):
        candidate = everything.get(key)
        if candidate is None:
            continue
        for use in candidate.device.get("consumesCounters") or []:
            ckey = (key[0], key[1], use.get("counterSet", ""))
            for counter, need in (use.get("counters") or {}).items():
                row = used.setdefault(ckey, {})
                row[counter] = row.get(counter, Fraction(0)) + parse_quantity(need.get("value", 0))
    return used


def _node_selector(picks: Sequence[_Pick], node_name: str) -> NodeSelector | None:
    specs = [p.candidate.slice_spec for p in picks]
    devices = [p.candidate.device for p in picks]
    local = any(s.get("nodeName") for s in specs) or any(d.get("nodeName") for d in devices)
    if local:
        return {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        }
    for spec, device in zip(specs, devices, strict=True):
        selector = device.get("nodeSelector") or spec.get("nodeSelector")
        if selector:
            return selector
    return None


def _quantity_text(amount: Fraction, like: object) -> str:
    """`amount` in the format (binary or decimal SI) of the capacity's published value: 30Gi stays
    "30Gi", 50 cores "50"."""
    return quantity_text(amount, str(like).endswith("i"))


def _results(search: _Search, claim_index: int, claim: ResourceClaim, node_name: str) -> AllocationResult:
    picks = [p for p in search.picks if search.slots[p.slot].claim == claim_index]
    identity = meta(claim).get("uid") or f"{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"
    results: list[DeviceRequestAllocationResult] = []
    for n, pick in enumerate(picks):
        result: DeviceRequestAllocationResult = {
            "request": pick.alternative.result_name,
            "driver": pick.candidate.key[0],
            "pool": pick.candidate.key[1],
            "device": pick.candidate.key[2],
        }
        if pick.alternative.admin:
            result["adminAccess"] = True
        if pick.consumed is not None:
            result["shareID"] = str(uuid.uuid5(_SHARE_NAMESPACE, f"{identity}/{pick.alternative.result_name}/{n}"))
            result["consumedCapacity"] = {
                _status_name(name, pick.candidate): _quantity_text(amount, _capacity_value(name, pick.candidate))
                for name, amount in sorted(pick.consumed.items())
            }
        results.append(result)
    config: list[DeviceAllocationConfiguration] = []
    for pick_alt in {p.alternative.result_name: p.alternative for p in picks}.values():
        device_class = search.classes.get(str(pick_alt.spec.get("deviceClassName", ""))) or {}
        for item in (device_class.get("spec") or {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [pick_alt.result_name], **item})
    for item in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        config.append({"source": "FromClaim", **item})
    allocation: AllocationResult = {"devices": {"results": results}}
    if config:
        allocation["devices"]["config"] = config
    selector = _node_selector(picks, node_name)
    if selector is not None:
        allocation["nodeSelector"] = selector
    return allocation


def _capacity_value(full: str, candidate: _Candidate) -> object:
    capacity = candidate.device.get("capacity") or {}
    found = capacity.get(full) or capacity.get(full.rpartition("/")[2]) or {}
    return found.get("value", "")


def _status_name(full: str, candidate: _Candidate) -> str:
    """The capacity's name as the device publishes it (kube writes that spelling in the status)."""
    capacity = candidate.device.get("capacity") or {}
    return full if full in capacity else full.rpartition("/")[2]


def allocate(
    claims: Sequence[ResourceClaim],
    node_name: str,
    node_labels: Mapping[str, str],
    classes: Mapping[str, DeviceClass],
    slices: Sequence[ResourceSlice] | DevicePools,
    allocated: Iterable[ResourceClaim] | InUse | InUseByPool = (),
    prefer: Callable[[DeviceKey, InUse], int] | None = None,
    held: Mapping[DeviceKey, Mapping[str, Fraction]] | None = None,
    results: bool = True,
) -> list[AllocationResult] | None:
    """Allocations for `claims` (not yet allocated) on the node, or None when they do not fit there.
    `slices` may be a `DevicePools` built once for many calls; `allocated` likewise an `InUse` or
    `InUseByPool` read once for the claims allocated already, which is not changed. `prefer`: a rank per
    device (lower is tried first, ties in pool order) instead of kube's first fit; whether the claims
    fit does not depend on it, only which devices they get. `held`: capacity granted outside DRA (the
    device plugin's shares of the same GPU), by fully qualified capacity name: consumed, the device
    in use. `results` False: only whether they fit ([] when they do: a filter that tries many nodes
    builds no allocation for each)."""
    pools = slices if isinstance(slices, DevicePools) else DevicePools(slices)
    node = pools.node_key(node_name, node_labels)
    candidates, incomplete = pools.reach(node_name, node_labels, node)
    # only the node's pools count, so the work per node does not grow with the cluster's claims
    reached = {c.key[:2] for c in candidates}
    known = allocated if isinstance(allocated, InUse | InUseByPool) else InUse.of(allocated)
    in_use = known.in_pools(reached)
    for key, amounts in (held or {}).items():
        in_use.shared.add(key)
        granted = in_use.consumed.setdefault(key, {})
        for name, amount in amounts.items():
            granted[name] = granted.get(name, Fraction(0)) + amount
    if prefer is not None:
        candidates.sort(key=lambda candidate: prefer(candidate.key, in_use))
    used = _counters_in_use(in_use, pools.everything) if pools.counters else {}
    search = _Search(claims, classes, pools, candidates, incomplete, in_use, used, node)
    if not search.run():
        return None
    if not results:
        return []
    return [_results(search, i, claim, node_name) for i, claim in enumerate(claims)]
