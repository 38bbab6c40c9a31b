"""The DRA side of the GPU ledger shared with the device-plugin path: a DRA device whose `uuid`
attribute names a GPU of the node's gpushare ledger row is that GPU, so what the device plugin's
share pods hold there (booked in the scheduler's node table) is capacity DRA may not grant again.

`uuid_devices` indexes the published devices by `uuid` once per catalog version; `ledger_consumed`
reads one node's row into per-device consumed capacity (`core` in the device's units, the share of
the GPU's compute held; `memory` in bytes), which the structured allocator counts as in use
(`draalloc.allocate(..., held=...)`). Nothing here runs for a pod without claims, and gpushare's own
fit is not touched. Callers: `DraCatalog` (`kubesem/dra.py`), the `dynamicresources` plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

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


def ledger_consumed(
    table: NodeTable, node: str, pools: DevicePools, by_uuid: Mapping[str, Sequence[DeviceKey]]
) -> dict[DeviceKey, dict[str, Fraction]]:
    """Per DRA device of the node's GPUs, the capacity the ledger has granted on it (fully qualified
    capacity names), for GPUs with something granted; empty for a node not in the table."""
    if not by_uuid or not table.has_node(node):
        return {}
    row = table.row(node)
    out: dict[DeviceKey, dict[str, Fraction]] = {}
    for column, gpu in enumerate(table.inventory(node).gpus):
        keys = by_uuid.get(gpu.uuid)
        free = int(table.core_free[row, column])
        if not keys or free == NO_GPU:
            continue
        core = Fraction(MILLI - free, MILLI)  # the share of the GPU's compute held
        memory = Fraction(int(table.gmem_total[row, column] - table.gmem_free[row, column]) * MIB)
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
