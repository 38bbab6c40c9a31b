"""Publish the node's GPU inventory for the scheduler: the `annotations.nodeDevices` annotation
(`NodeInventory.to_annotation()`, with each GPU's MIG mode and, for static MIG GPUs, their MIG devices
with start slices), the `labels.gpuModel` / `labels.gpuCount` labels, and the `labels.memoryUnit`
label: the size of one gpu-memory device on this node, which the scheduler reads to convert a pod's
gpu-memory count to MiB there.

`NodePublisher.publish(devices)` patches the node only when what it would write differs from what it
last wrote, so health changes are published and nothing else costs a request. Callers: the device
plugin manager, after every change of the runtime's devices.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.deviceplugin.kubeapi import NodeApi
from runtimekit.kube.errors import KubeError
from runtimekit.model import Gpu, GpuUUID, MigMode, NodeInventory, NodeName
from runtimekit.model.gpu import MigInstance
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.names import format_memory_unit

log = logging.getLogger(__name__)

_MIG = {pb.MIG_MODE_STATIC: MigMode.STATIC, pb.MIG_MODE_DYNAMIC: MigMode.DYNAMIC}


def inventory(node: str, devices: Sequence[pb.Device]) -> NodeInventory:
    """The node's GPUs as the scheduler reads them. A static MIG GPU lists its MIG devices (UUID,
    profile, start), which is its layout for the ledger; a dynamic one only its mode: its devices live
    as long as their pods, whose assignments already say where they are."""
    gpus = (
        Gpu(
            d.index,
            GpuUUID(d.uuid),
            d.model,
            d.memory_mib,
            d.health == pb.HEALTH_HEALTHY,
            _MIG.get(d.mig_mode, MigMode.OFF),
            _static_devices(d),
        )
        for d in devices
    )
    return NodeInventory(NodeName(node), tuple(sorted(gpus, key=lambda g: g.index)))


def _static_devices(device: pb.Device) -> tuple[MigInstance, ...]:
    if device.mig_mode != pb.MIG_MODE_STATIC:
        return ()
    return tuple(MigInstance(m.uuid, m.profile, m.start) for m in sorted(device.mig_devices, key=lambda m: m.start))


def node_metadata(
    node: str, devices: Sequence[pb.Device], protocol: KitProtocol, memory_unit_mib: int = 0
) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) describing the node's GPUs; `memory_unit_mib` 0 means the protocol's."""
    inv = inventory(node, devices)
    labels = {
        protocol.labels.gpu_model: inv.model,
        protocol.labels.gpu_count: str(len(inv.gpus)),
        protocol.labels.memory_unit: format_memory_unit(memory_unit_mib or protocol.memory_unit_mib),
    }
    return labels, {protocol.annotations.node_devices: inv.to_annotation()}


class NodePublisher:
    def __init__(self, kube: NodeApi, node: str, protocol: KitProtocol, memory_unit_mib: int = 0) -> None:
        self._kube = kube
        self._node = node
        self._protocol = protocol
        self._memory_unit_mib = memory_unit_mib
        self._last: tuple[dict[str, str], dict[str, str]] | None = None

    def publish(self, devices: Sequence[pb.Device]) -> bool:
        """Write the node's labels and inventory when they changed; False when the API server refused."""
        wanted = node_metadata(self._node, devices, self._protocol, self._memory_unit_mib)
        if wanted == self._last:
            return True
        labels, annotations = wanted
        try:
            self._kube.patch_node_metadata(self._node, dict(labels), dict(annotations))
        except KubeError as exc:
            log.warning("cannot publish the GPU inventory of node %s (will retry): %s", self._node, exc)
            return False
        self._last = wanted
        unhealthy = sum(1 for d in devices if d.health != pb.HEALTH_HEALTHY)
        log.info("published node %s: %d GPUs (%d unhealthy)", self._node, len(devices), unhealthy)
        return True
