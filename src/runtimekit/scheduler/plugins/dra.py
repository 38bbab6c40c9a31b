"""`dynamicresources`: kube-scheduler's DynamicResources plugin — a pod's ResourceClaims are
allocated on the node chosen for it by the structured allocator (`kube.semantics.draalloc`).

- PrePredicate, Predicate: a pod without `spec.resourceClaims` skips the predicate (PrePredicate
  answers SKIP after one dict lookup, as kube's PreFilter does), so it pays no mask. Otherwise
  its claims are resolved (`kubesem.dra.pod_claims`: a template's claim is waited for until the
  controller made it); claims already allocated must have a node selector the node matches; the
  others are allocated per node, counting as in use every allocated claim and the allocations this
  scheduler reserved but has not yet seen written (kube's `inFlightAllocations`), and on a device
  whose `uuid` is a GPU of the node's gpushare ledger row, what the device plugin's share pods hold
  there (`kubesem.draledger`: the shared ledger, DRA side). An unknown class,
  a selector that fails or a claim not there is unresolvable on every node, with its reason in
  PodScheduled/FailedScheduling; a node whose devices do not fit says "cannot allocate all claims".
- Reserve: the allocation is worked out again on the chosen node (the same answer: the allocator is
  deterministic) and held in flight, so the pods placed after it — a gang's other members in the
  same statement too — see the devices taken, until a session's claims show PreBind's write (or the
  claim deleted or deallocated since). Unreserve gives it back and, when PreBind had written
  it, undoes the write (the pod leaves `reservedFor`; a claim it allocated loses its allocation).
- PreBind: each claim's `status.allocation` is written (unless allocated already) and the pod is
  added to `status.reservedFor` (`{resource: pods, name, uid}`), before the pod is bound.

Devices: for a pod whose claims the task's request carries (`kubesem.drarequest`: the kit's class,
whole GPUs or shares), gpushare's policy chooses the node and the GPU, and Reserve holds each request
to the chosen GPUs' UUIDs (a selector), a share naming only `core` asking memory in proportion; the
DRA allocations held in the node table (booked by the cache, or by such a pod's own placement) are
left out of the ledger's consumed capacity so nothing counts twice. Other claims: shared devices
already in use are tried first (packing shares, not kube's first fit), then pool order.
Callers: the framework (registered in `builtin.py`).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from runtimekit.kube.objects import AllocationResult, ResourceClaim, ResourceClaimConsumerReference
from runtimekit.kube.semantics.draalloc import AllocationError, DeviceKey, InUse, InUseByPool, allocate
from runtimekit.kube.semantics.nodeaffinity import required_matches, selector_terms
from runtimekit.kube.semantics.podclaims import uses_claims
from runtimekit.model import GpuKind, GpuRequest, PodKey
from runtimekit.model.nodetable import NodeTable
from runtimekit.scheduler.framework.arguments import Arguments
from runtimekit.scheduler.framework.binding import ClaimAccess
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    Binding,
    DeviceChoice,
    Plugin,
    PreBind,
    Predicate,
    PrePredicate,
    Rows,
    SessionView,
    Verdict,
    Watches,
)
from runtimekit.scheduler.framework.interfaces import Reserve as ReservePoint
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, error
from runtimekit.scheduler.kubesem.dra import DraCatalog, pod_claims
from runtimekit.scheduler.kubesem.draledger import GpuUse, booked_by_uuid, gpu_uses, ledger_consumed
from runtimekit.scheduler.kubesem.drarequest import KIT_CLASS, claim_container, is_claim_container, split_container

log = logging.getLogger(__name__)
CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass
class _Held:
    """A reserved pod's claims: each key with the allocation Reserve chose (None: allocated already),
    and which of them PreBind wrote (to undo on a failed bind)."""

    claims: list[tuple[str, AllocationResult | None]]
    written: list[str] = field(default_factory=list)
    access: ClaimAccess | None = None  # where PreBind wrote them
    in_table: bool = False  # the pod's placement holds these GPUs in the node table (a request from claims)
    written_in: int = -1  # sessions opened when PreBind had written them all (-1: not yet)


@dataclass(frozen=True)
class _Known:
    """What one pod's claims meet on every node (`DynamicResources._known`): the devices in use, the
    allocations reserved in flight by claim key, and the GPU uses of those a placement holds in the
    node table (by UUID)."""

    in_use: InUseByPool
    in_flight: Mapping[str, AllocationResult]
    table_uses: Mapping[str, tuple[GpuUse, ...]]


def _allocation(claim: ResourceClaim) -> AllocationResult | None:
    return (claim.get("status") or {}).get("allocation")


class DynamicResources(Plugin, PrePredicate, Predicate, ReservePoint, PreBind, Watches):
    """See the module docstring."""

    name = "dynamicresources"
    watches: tuple[str, ...] = ("resourceclaims", "deviceclasses", "resourceslices")

    def __init__(self) -> None:
        self.held: dict[PodKey, _Held] = {}
        self._lock = threading.Lock()  # `held` changes on the loop thread (Reserve) and binder threads
        self.opened = 0  # sessions opened so far

    def on_session_open(self, ssn: SessionView) -> None:
        # PreBind's writes, once the session's claims show them, count from there: held longer, an
        # allocation whose claim was deleted or deallocated meanwhile (its pod gone before any session
        # saw it: sessions only open when there is work) would hold its devices for ever
        self.opened += 1
        claims = ssn.snapshot.dra.claims
        with self._lock:
            for key in [k for k, h in self.held.items() if h.written and self._seen(h, claims)]:
                self.held.pop(key, None)

    def _seen(self, held: _Held, claims: Mapping[str, ResourceClaim]) -> bool:
        """Whether the session's claims show what PreBind wrote, or what came after it: each claim
        allocated there or gone (a claim exists before its pod is placed, so gone is deleted), or the
        snapshot was taken after the writes. The loop opens one session at a time, so the second
        session opened after PreBind finished took its snapshot after the writes (the cache takes a
        write in as it is made); one claim deallocated since is seen free from then on."""
        if held.written_in >= 0 and self.opened >= held.written_in + 2:
            return True
        return all(c not in claims or _allocation(claims[c]) is not None for c, _ in held.claims)

    # -- what is in use --------------------------------------------------------------------------
    def _known(self, catalog: DraCatalog) -> _Known:
        """What one pod's claims meet on every node it tries, read once for them all: the claims
        allocated, and the allocations reserved in flight whose claims do not show them yet."""
        with self._lock:
            helds = list(self.held.values())
        in_flight: dict[str, AllocationResult] = {}
        table_uses: dict[str, list[GpuUse]] = {}
        for held in helds:
            for key, result in held.claims:
                claim = catalog.claims.get(key)
                if result is None or (claim is not None and _allocation(claim) is not None):
                    continue
                in_flight.setdefault(key, result)
                if held.in_table:
                    for use in gpu_uses(result, catalog.pools):
                        table_uses.setdefault(use.uuid, []).append(use)
        allocated = catalog.held.in_use
        in_use = allocated.with_allocations(in_flight.values()) if in_flight else allocated
        return _Known(in_use, in_flight, {u: tuple(uses) for u, uses in table_uses.items()})

    def _booked(
        self, catalog: DraCatalog, table: NodeTable, name: str, own: Mapping[str, tuple[int, int]], known: _Known
    ) -> dict[str, tuple[int, int]]:
        """(milli, MiB) per GPU UUID of the node that DRA allocations hold in the node table: allocated
        claims (the cache books them), the in-flight allocations of pods placed with their claims'
        GPUs, and `own` (the pod being reserved, whose placement the session has taken already)."""
        if not catalog.by_uuid or not table.has_node(name):
            return {}
        row = table.row(name)
        totals = {str(gpu.uuid): int(table.gmem_total[row, c]) for c, gpu in enumerate(table.inventory(name).gpus)}
        uses = [
            use
            for uuid in totals
            for found in (catalog.held.uses.get(uuid, ()), known.table_uses.get(uuid, ()))
            for use in found
        ]
        booked = booked_by_uuid(uses, totals)
        for uuid, (milli, mib) in own.items():
            had = booked.get(uuid, (0, 0))
            booked[uuid] = (had[0] + milli, had[1] + mib)
        return booked

    def _fit(
        self,
        task: TaskInfo,
        keys: tuple[str, ...],
        catalog: DraCatalog,
        name: str,
        labels: dict[str, str],
        table: NodeTable,
        known: _Known,
        chosen: Mapping[str, _Chosen] | None = None,
        results: bool = True,
    ) -> list[tuple[str, AllocationResult | None]] | None:
        """The claims' allocations on the node, or None when they do not fit (AllocationError raised);
        `results` False: whether they fit only (the allocations left None)."""
        pending: list[str] = []
        out: list[tuple[str, AllocationResult | None]] = []
        for key in keys:
            # the claim's allocation: written, or reserved in flight by another pod
            current = _allocation(catalog.claims[key])
            if current is None:
                current = known.in_flight.get(key)
            if current is None:
                pending.append(key)
                out.append((key, None))
                continue
            selector = current.get("nodeSelector")
            if selector is not None and not required_matches((), selector_terms(selector), labels, name):
                return None
            out.append((key, None))
        if not pending:
            return out
        # the device plugin's shares of the same GPUs (the gpushare ledger's row) are consumed capacity,
        # less what DRA allocations hold there themselves (booked in the row by the cache)
        own = {u: a for c in (chosen or {}).values() for u, a in c.amounts.items()}
        booked = self._booked(catalog, table, name, own, known) if catalog.by_uuid else {}
        held = ledger_consumed(table, name, catalog.pools, catalog.by_uuid, booked)
        claims = [_shaped(catalog.claims[k], k, task, table, name, chosen) for k in pending]
        made = allocate(claims, name, labels, catalog.classes, catalog.pools, known.in_use, _packing, held, results)
        if made is None:
            return None
        allocated = dict(zip(pending, made, strict=True)) if results else {}
        return [(k, allocated.get(k)) for k, _ in out]

    # -- PrePredicate, Predicate ---------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> Status:
        """A pod without claims skips the predicate (kube's PreFilter Skip): no mask is made for it."""
        pod = task.pod
        return SUCCESS if uses_claims(pod) else SKIP

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        pod = task.pod
        if pod is None or not (pod.get("spec") or {}).get("resourceClaims"):  # (pre_predicate skips these)
            return Verdict.all(rows.size)
        catalog = ssn.snapshot.dra
        claims = pod_claims(pod, catalog.claims)
        none = np.zeros(rows.size, np.bool_)
        if claims.waiting:
            return Verdict(none, [(claims.waiting, ~none)], ~none)
        passed = none.copy()
        metas = ssn.snapshot.meta
        known = self._known(catalog)
        try:
            for i, row in enumerate(rows.tolist()):
                node = metas[row]
                if node is not None:
                    passed[i] = (
                        self._fit(
                            task, claims.keys, catalog, node.name, dict(node.labels), ssn.table, known, results=False
                        )
                        is not None
                    )
        except AllocationError as exc:
            return Verdict(none, [(str(exc), ~none)], ~none)
        return Verdict(passed, [(CANNOT_ALLOCATE, ~passed)], ~passed)

    # -- Reserve ---------------------------------------------------------------------------------
    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        pod = task.pod
        if pod is None or not uses_claims(pod) or task.node is None:
            return SUCCESS
        catalog = ssn.snapshot.dra
        claims = pod_claims(pod, catalog.claims)
        if claims.waiting:
            return error(claims.waiting)
        node = ssn.snapshot.meta[ssn.table.row(task.node)]
        if node is None:
            return error(f"node {task.node} is gone")
        chosen = _chosen(choice, ssn.table, node.name)
        try:
            known = self._known(catalog)
            fit = self._fit(task, claims.keys, catalog, node.name, dict(node.labels), ssn.table, known, chosen)
        except AllocationError as exc:
            return error(str(exc))
        if fit is None:
            return error(f"{CANNOT_ALLOCATE} on node {task.node}")
        with self._lock:
            self.held[task.key] = _Held(fit, in_table=bool(chosen))
        return SUCCESS

    def unreserve(self, task: TaskInfo) -> None:
        with self._lock:
            held = self.held.pop(task.key, None)
        if held is None or not held.written or held.access is None:
            return
        for key in held.written:
            try:
                _release(held.access, key, task, allocated=dict(held.claims).get(key) is not None)
            except Exception as exc:  # the claim controller frees what a gone pod held
                log.warning("undoing the allocation of claim %s for pod %s: %s", key, task.key, exc)

    # -- PreBind ---------------------------------------------------------------------------------
    def pre_bind(self, binding: Binding) -> Status:
        task = binding.task
        with self._lock:
            held = self.held.get(task.key)
        if held is None:
            return SUCCESS
        access = binding.claims
        if access is None:
            return error("no ResourceClaim access to write allocations with")
        held.access = access
        for key, result in held.claims:
            claim = access.claim(key)
            if claim is None:
                return error(f'resourceclaim "{key}" is gone')
            status = copy.deepcopy(claim.get("status") or {})
            if result is not None:
                if status.get("allocation") is not None:
                    return error(f'resourceclaim "{key}" was allocated meanwhile')
                status["allocation"] = result
            consumers = status.setdefault("reservedFor", [])
            if not any(c.get("uid") == task.uid for c in consumers):
                consumers.append(_consumer(task))
            updated = copy.copy(claim)
            updated["status"] = status
            try:
                access.update_status(updated)
            except Exception as exc:
                return error(f'writing resourceclaim "{key}": {exc}')
            held.written.append(key)
        held.written_in = self.opened
        return SUCCESS


@dataclass(frozen=True)
class _Chosen:
    """The GPUs gpushare chose for one request of a claim (a claim container): their UUIDs, and the
    (milli, MiB) its slots take on each (in the session's table already at Reserve)."""

    uuids: tuple[str, ...]
    amounts: dict[str, tuple[int, int]]
    memory_mib: int  # MiB a share takes on each of them (what a claim naming only `core` consumes)


def _chosen(choice: DeviceChoice, table: NodeTable, node: str) -> dict[str, _Chosen]:
    """Per claim container of the choice, the GPUs chosen for it (empty for a pod not placed so)."""
    out: dict[str, _Chosen] = {}
    if not table.has_node(node):
        return out
    gpus = table.inventory(node).gpus
    for container, slots in choice.containers:
        if is_claim_container(container) and slots:
            amounts: dict[str, tuple[int, int]] = {}
            for slot in slots:
                had = amounts.get(gpus[slot.gpu].uuid, (0, 0))
                amounts[gpus[slot.gpu].uuid] = (had[0] + slot.core_milli, had[1] + slot.memory_mib)
            uuids = tuple(gpus[slot.gpu].uuid for slot in slots)
            out[container] = _Chosen(uuids, amounts, min(slot.memory_mib for slot in slots))
    return out


def _shaped(
    claim: ResourceClaim, key: str, task: TaskInfo, table: NodeTable, node: str, chosen: Mapping[str, _Chosen] | None
) -> ResourceClaim:
    """The claim as the allocator is to place it: a request the pod's request reads as a share whose
    memory follows its compute (`core` named, `memory` not: the device plugin's rule) asks for that
    memory on the node's GPUs (the smallest, or the GPUs chosen); at Reserve each request of a claim
    container is held to the GPUs gpushare chose (a selector on their UUIDs)."""
    shares = {
        c.container: c.gpu
        for c in task.request.gpus
        if is_claim_container(c.container) and split_container(c.container)[0] == key
    }
    proportional = any(
        g.kind is GpuKind.SHARE and g.memory_mib is None and g.memory_percent is None for g in shares.values()
    )
    if not shares or (not proportional and not chosen):
        return claim
    out = copy.deepcopy(claim)
    for request in ((out.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly")
        container = claim_container(key, request.get("name", ""))
        gpu = shares.get(container)
        if exactly is None or gpu is None:
            continue
        picked = (chosen or {}).get(container)
        if gpu.kind is GpuKind.SHARE and gpu.memory_mib is None and gpu.memory_percent is None:
            memory = picked.memory_mib if picked is not None else _smallest_share(gpu, table, node)
            capacity = exactly.setdefault("capacity", {})
            capacity.setdefault("requests", {})["memory"] = f"{memory}Mi"
        if picked is not None:
            listed = ", ".join(f'"{u}"' for u in sorted(set(picked.uuids)))
            expression = f'device.attributes["{KIT_CLASS}"].uuid in [{listed}]'
            exactly["selectors"] = [*exactly.get("selectors", []), {"cel": {"expression": expression}}]
    return out


def _smallest_share(gpu: GpuRequest, table: NodeTable, node: str) -> int:
    """MiB the share takes on the node's GPU of least memory (gpushare's fit checks each GPU)."""
    if not table.has_node(node):
        return 0
    gpus = table.inventory(node).gpus
    return min((gpu.memory_on(g.memory_mib) for g in gpus), default=0)


def _packing(key: DeviceKey, in_use: InUse) -> int:
    """Shared devices already in use first (fewest shares free a GPU for whole-device asks and
    larger shares, as the kit's share policies pack), then the rest in pool order."""
    return 0 if key in in_use.shared else 1


def _consumer(task: TaskInfo) -> ResourceClaimConsumerReference:
    return {"resource": "pods", "name": task.name, "uid": task.uid}


def _release(access: ClaimAccess, key: str, task: TaskInfo, allocated: bool) -> None:
    claim = access.claim(key)
    if claim is None:
        return
    status = copy.deepcopy(claim.get("status") or {})
    status["reservedFor"] = [c for c in status.get("reservedFor") or [] if c.get("uid") != task.uid]
    if allocated and not status["reservedFor"]:
        status.pop("allocation", None)
    updated = copy.copy(claim)
    updated["status"] = status
    access.update_status(updated)


def build(arguments: Arguments, context: BuildContext) -> DynamicResources:
    return DynamicResources()
