"""The GPU ledger's DRA bookings: each allocated ResourceClaim whose devices are GPUs of the ledger
(a device's `uuid` attribute names a GPU of a node's inventory, whichever driver publishes it) is
booked as a placement of its own on those GPU columns, under the key `resourceclaim:<ns>/<name>@<node>`,
so that gpushare's fit, its policies, the queues and everything reading the node table's free core
and memory see what claims hold (the other direction of the ledger shared with the device-plugin
path; the DRA side is `kubesem/draledger.py`).

A share is booked as the capacity it consumed (`core` as a share of the device's, `memory` in MiB,
rounded up), a device taken whole as the whole GPU. A claim deallocated or deleted gives its
bookings back. A claim whose devices are not known yet (its slices, or the node, not seen yet: a
restarted scheduler hears of claims, slices and nodes in any order) waits in `pending` and is booked
when a slice or a node comes. A booking the ledger refuses (the GPU is held already) is left out and
logged, never double-booked.

Callers: the cluster cache (`cluster.py`), under its lock. Not thread-safe on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from runtimekit.kube.objects import ResourceClaim
from runtimekit.kube.semantics.draalloc import DevicePools
from runtimekit.model import Ledger, LedgerError, NodeName, Placement, PodKey, Slot
from runtimekit.model.nodetable import NodeTable
from runtimekit.scheduler.kubesem.draledger import GpuUse, device_uuid, gpu_uses

log = logging.getLogger(__name__)
PREFIX = "resourceclaim:"


def claim_key(claim: ResourceClaim) -> str:
    """namespace/name, as the DRA store keys claims."""
    metadata = claim.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


@dataclass
class ClaimBook:
    """See the module docstring."""

    ledger: Ledger
    booked: dict[str, tuple[PodKey, ...]] = field(default_factory=dict)  # claim -> its ledger keys
    pending: dict[str, ResourceClaim] = field(default_factory=dict)  # allocated, some device not placed yet
    conflicts: dict[str, str] = field(default_factory=dict)  # claim -> why the ledger refused it
    allocations: dict[str, object] = field(default_factory=dict)  # claim -> the allocation booked (or pending)

    def apply(self, kind: str, claim: ResourceClaim, pools: DevicePools) -> bool:
        """A claim's informer event (or PreBind's write); True when its bookings changed."""
        key = claim_key(claim)
        allocation = (claim.get("status") or {}).get("allocation")
        if kind != "DELETED" and allocation is not None and self.allocations.get(key) == allocation:
            return False  # booked as it is (reservedFor may change, the allocation not)
        changed = self.release(key)
        if kind == "DELETED" or allocation is None:
            return changed
        return self._book(key, claim, pools) or changed

    def release(self, key: str) -> bool:
        self.allocations.pop(key, None)
        self.pending.pop(key, None)
        self.conflicts.pop(key, None)
        keys = self.booked.pop(key, ())
        for ledger_key in keys:
            self.ledger.release(ledger_key)
        return bool(keys)

    def retry(self, pools: DevicePools) -> bool:
        """Book the pending claims again (a slice or a node came); True when something was booked."""
        changed = False
        for key, claim in list(self.pending.items()):
            self.release(key)
            changed = self._book(key, claim, pools) or changed
        return changed

    def _book(self, key: str, claim: ResourceClaim, pools: DevicePools) -> bool:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        self.allocations[key] = allocation
        uses = gpu_uses(allocation, pools)
        unplaced = not _results_known(claim, pools)
        per_node: dict[NodeName, list[Slot]] = {}
        for use in uses:
            found = self._gpu_of(use, pools)
            if found is None:
                continue  # not a GPU of the ledger (a MIG device's UUID, a GPU of no known node)
            if isinstance(found, str):
                unplaced = True  # its node is not known yet
                continue
            node, column = found
            total = int(self.ledger.table.gmem_total[self.ledger.table.row(node), column])
            milli, mib = use.on(total)
            per_node.setdefault(node, []).append(Slot(column, milli, mib))
        if unplaced:
            self.pending[key] = claim
        keys: list[PodKey] = []
        for node in sorted(per_node):
            ledger_key = PodKey(f"{PREFIX}{key}@{node}")
            try:
                self.ledger.reserve(ledger_key, Placement(node, slots=tuple(per_node[node])), allow_unusable=True)
            except LedgerError as exc:
                self.conflicts[key] = str(exc)
                log.error("resourceclaim %s cannot be booked in the GPU ledger: %s", key, exc)
                continue
            keys.append(ledger_key)
        if keys:
            self.booked[key] = tuple(keys)
        return bool(keys)

    def _gpu_of(self, use: GpuUse, pools: DevicePools) -> tuple[NodeName, int] | str | None:
        """The node and GPU column of the device's UUID: on the slice's node (its name when the node is
        not known yet), or for a slice of no one node, on any node; None when no GPU has it."""
        table = self.ledger.table
        spec_node = pools.everything[use.device].slice_spec.get("nodeName") or ""
        if spec_node and not table.has_node(spec_node):
            return spec_node
        for node in [NodeName(spec_node)] if spec_node else table.node_names():
            for column, gpu in enumerate(table.inventory(node).gpus):
                if gpu.uuid == use.uuid:
                    return node, column
        return None

    def node_gone(self, ledger_key: PodKey, claim: Callable[[str], ResourceClaim | None]) -> None:
        """A node went with one of a claim's bookings (the ledger dropped it): the claim waits for it."""
        key = ledger_key[len(PREFIX) :].rpartition("@")[0]
        keys = self.booked.pop(key, ())
        for other in keys:
            if other != ledger_key:
                self.ledger.release(other)
        found = claim(key)
        if found is not None and (found.get("status") or {}).get("allocation") is not None:
            self.pending[key] = found


def ledger_backed(pools: DevicePools, table: NodeTable, driver: str) -> bool:
    """Whether every GPU the driver publishes (a device with a `uuid` that is not a MIG device) on a
    node of the table is a GPU of that node's inventory: then a request for its devices may be placed
    by gpushare (`kubesem/drarequest.py`); a node whose GPUs only DRA publishes has none in the table."""
    gpus: dict[str, frozenset[str]] = {}
    for key, candidate in pools.everything.items():
        if key[0] != driver:
            continue
        attributes = candidate.device.get("attributes") or {}
        uuid = device_uuid(pools, key)
        kind = (attributes.get("type") or attributes.get(f"{driver}/type") or {}).get("string", "")
        node = candidate.slice_spec.get("nodeName") or ""
        if not uuid or kind == "mig" or not node or not table.has_node(node):
            continue
        if node not in gpus:
            gpus[node] = frozenset(gpu.uuid for gpu in table.inventory(node).gpus)
        if uuid not in gpus[node]:
            return False
    return True


def _results_known(claim: ResourceClaim, pools: DevicePools) -> bool:
    """Every device of the allocation is published (else its UUID cannot be known yet)."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return all((r.get("driver", ""), r.get("pool", ""), r.get("device", "")) in pools.everything for r in results)
