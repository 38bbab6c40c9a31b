"""Each node's gpu-memory unit, and a container's GPU request in it.

The device plugin of every node publishes the size of one gpu-memory device there in the node label
`labels.memoryUnit` (its `--memory-unit`, by default the protocol's `memoryUnit`). A pod's
`gpu-memory: N` is N of those devices on the node it lands on, as kubelet counts them: N times that
node's unit, in MiB. `parse_pod_request` converts with the protocol's unit; on a node with another
unit the plugin rescales the request (`in_unit`) before it checks the fit or picks the GPUs, so the
assignment records the MiB the pod gets there. Nodes without the label (a device plugin that does not
publish it, the embedded cluster's direct mode) use the protocol's unit; a label that is not a memory
unit makes the node refuse requests counted in memory units. Whole GPUs, compute-only shares and MIG
slices do not depend on the unit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from runtimekit.model import GpuKind, GpuRequest
from runtimekit.protocol.names import memory_unit_mib
from runtimekit.scheduler.framework.info import NodeMeta, Snapshot

UNREADABLE = 0  # the unit of a node whose label is not a memory unit


def uses_units(req: GpuRequest) -> bool:
    """Whether the request's memory was given in memory units (a share with a gpu-memory amount)."""
    return req.kind is GpuKind.SHARE and req.memory_mib is not None


def in_unit(req: GpuRequest, default_mib: int, unit_mib: int) -> GpuRequest:
    """`req` (memory converted with `default_mib` per unit) on a node whose unit is `unit_mib`."""
    if unit_mib == default_mib or not uses_units(req):
        return req
    assert req.memory_mib is not None
    return replace(req, memory_mib=req.memory_mib // default_mib * unit_mib)


class NodeUnits:
    """The unit, in MiB, of every row of a session's snapshot (UNREADABLE for a bad label), worked
    out again only when the snapshot's node metadata changes."""

    def __init__(self, label: str, default_mib: int) -> None:
        self.label = label
        self.default_mib = default_mib
        self._key: tuple[object, int, int] | None = None
        self._meta: list[NodeMeta | None] | None = None  # kept, so its id is not reused while cached
        self._units: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._uniform = True

    def of(self, snapshot: Snapshot) -> npt.NDArray[np.int64]:
        key = (id(snapshot.meta), snapshot.meta_version, len(snapshot.meta))
        if key != self._key:
            self._units = np.array([self._unit(meta) for meta in snapshot.meta], np.int64)
            self._uniform = bool((self._units == self.default_mib).all())
            self._key, self._meta = key, snapshot.meta
        return self._units

    def uniform(self, snapshot: Snapshot) -> bool:
        """Whether every node counts in the protocol's unit (the usual case: nothing to convert)."""
        self.of(snapshot)
        return self._uniform

    def _unit(self, meta: NodeMeta | None) -> int:
        text = meta.labels.get(self.label) if meta is not None else None
        if text is None:
            return self.default_mib
        try:
            return memory_unit_mib(text)
        except ValueError:
            return UNREADABLE
