"""The DRA side of the GPU ledger shared with the device-plugin path: a DRA device whose `uuid`
attribute names a GPU of the node's gpushare ledger row is that GPU, so what the device plugin's
share pods hold there (booked in the scheduler's node table) is capacity DRA may not grant again.

`uuid_devices` indexes the published devices by `uuid` once per catalog version; `ledger_consumed`
reads one node's row into per-device consumed capacity (`core` in the device's units, the share of
the GPU's compute held; `memory` in bytes), which the structured allocator counts as in use
(`draalloc.allocate(..., held=...)`), less what DRA allocations themselves hold in the row (`booked`:
the other direction books them there, so they would otherwise count twice). Nothing here runs for a
pod without claims.

The other direction: `gpu_uses` reads an allocation's results into what each takes of a GPU in
the ledger's units (`GpuUse`: milli of compute, MiB of memory, or all of it for a device taken
whole), which the scheduler cache books on the GPU column with that `uuid` (`cache/claimbook.py`), so
gpushare's fit and everything reading the node table's free core and memory see it.
Callers: `DraCatalog` (`kubesem/dra.py`), the `dynamicresources` plugin, the cache's claim book.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from runtimekit.kube.objects import AllocationResult
from runtimekit.kube.semantics.draalloc import DeviceKey, DevicePools
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.model.nodetable import NodeTable
from runtimekit.model.placement import MILLI, NO_GPU

MIB = 1 << 20


def _is_uuid(name: str, driver: str) -> bool:
    domain, _, short = name.rpartition("/")
    return short == "uuid" and domain in ("", driver)


def uuid_devices(pools: DevicePools) -> dict[str, tuple[DeviceKey, ...]]:
    """Every published device that has a string `uuid` attribute, by that UUID (any driver: a GPU's
    UUID names it whichever driver publishes it), in pool order."""
    found: dict[str, list[DeviceKey]] = {}
    for key, candidate in pools.everything.items():
        for name, attribute in (candidate.device.get("attributes") or {}).items():
            value = attribute.get("string")
            if value and _is_uuid(name, key[0]):
                found.setdefault(value, []).append(key)
    return {uuid: tuple(keys) for uuid, keys in found.items()}


@dataclass(frozen=True)
class GpuUse:
    """What one device of an allocation takes of the GPU with `uuid`: `milli` of its compute and `mib`
    of its memory, or all of it (`whole`: a device taken whole, not as a share)."""

    uuid: str
    device: DeviceKey
    milli: int = 0
    mib: int = 0
    whole: bool = False

    def on(self, total_mib: int) -> tuple[int, int]:
        """(milli, MiB) on a GPU of `total_mib` of memory."""
        return (MILLI, total_mib) if self.whole else (min(self.milli, MILLI), min(self.mib, total_mib))


def device_uuid(pools: DevicePools, key: DeviceKey) -> str:
    """The device's `uuid` attribute ("" when it has none or is not published)."""
    candidate = pools.everything.get(key)
    if candidate is None:
        return ""
    for name, attribute in (candidate.device.get("attributes") or {}).items():
        value = attribute.get("string")
        if value and _is_uuid(name, key[0]):
            return value
    return ""


def gpu_uses(allocation: AllocationResult, pools: DevicePools) -> list[GpuUse]:
    """What each result of an allocation takes of a GPU with a `uuid` (admin access takes nothing):
    consumed `core` as a share of the device's `core` capacity, rounded up to a milli; `memory` in
    bytes rounded up to a MiB; a result without consumed capacity or share ID takes the device whole."""
    out: list[GpuUse] = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        if result.get("adminAccess"):
            continue
        key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
        uuid = device_uuid(pools, key)
        if not uuid:
            continue
        if "shareID" not in result and "consumedCapacity" not in result:
            out.append(GpuUse(uuid, key, whole=True))
            continue
        capacity = pools.everything[key].device.get("capacity") or {}
        milli = mib = 0
        for name, amount in (result.get("consumedCapacity") or {}).items():
            short = name.rpartition("/")[2]
            value = parse_quantity(amount)
            if short == "core":
                total = parse_quantity((capacity.get(name) or capacity.get(short) or {}).get("value", 0))
                milli = math.ceil(value * MILLI / total) if total > 0 else 0
            elif short == "memory":
                mib = math.ceil(value / MIB)
        out.append(GpuUse(uuid, key, milli, mib))
    return out


def booked_by_uuid(uses: Iterable[GpuUse], total_mib: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """(milli, MiB) the uses take per GPU UUID, for the GPUs in `total_mib` (their memory)."""
    out: dict[str, tuple[int, int]] = {}
    for use in uses:
        total = total_mib.get(use.uuid)
        if total is None:
            continue
        milli, mib = use.on(total)
        had = out.get(use.uuid, (0, 0))
        out[use.uuid] = (had[0] + milli, had[1] + mib)
    return out


def ledger_consumed(
    table: NodeTable,
    node: str,
    pools: DevicePools,
    by_uuid: Mapping[str, Sequence[DeviceKey]],
    booked: Mapping[str, tuple[int, int]] | None = None,
) -> dict[DeviceKey, dict[str, Fraction]]:
    """Per DRA device of the node's GPUs, the capacity the ledger has granted on it outside DRA
    (fully qualified capacity names), for GPUs with something granted; empty for a node not in the
    table. `booked`: (milli, MiB) per GPU UUID that DRA allocations hold in the row themselves."""
    if not by_uuid or not table.has_node(node):
        return {}
    row = table.row(node)
    out: dict[DeviceKey, dict[str, Fraction]] = {}
    for column, gpu in enumerate(table.inventory(node).gpus):
        keys = by_uuid.get(gpu.uuid)
        free = int(table.core_free[row, column])
        if not keys or free == NO_GPU:
            continue
        dra_milli, dra_mib = (booked or {}).get(gpu.uuid, (0, 0))
        core = Fraction(max(MILLI - free - dra_milli, 0), MILLI)  # the share of the GPU's compute held
        used_mib = int(table.gmem_total[row, column] - table.gmem_free[row, column]) - dra_mib
        memory = Fraction(max(used_mib, 0) * MIB)
        if core <= 0 and memory <= 0:
            continue
        for key in keys:
            used: dict[str, Fraction] = {}
            for name, capacity in (pools.everything[key].device.get("capacity") or {}).items():
                total = parse_quantity(capacity.get("value", 0))
                short = name.rpartition("/")[2]
                amount = core * total if short == "core" else memory if short == "memory" else None
                if amount is not None:
                    used[name if "/" in name else f"{key[0]}/{name}"] = min(amount, total)
            out[key] = used
    return out
