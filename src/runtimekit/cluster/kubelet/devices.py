"""Where a simulated kubelet's extended resources come from, and how a pod's devices are allocated.

Two implementations of `NodeDevices`:
- `PluginDevices`: the real path. Resources are what device plugins registered with the kubelet's
  `DeviceManager` advertise (capacity = all devices, allocatable = healthy ones); admission calls
  the plugins' Allocate per container and resource, as kubelet does, and hands the container the
  plugin's environment. The device plugin publishes the node's GPU inventory itself.
- `DirectDevices`: no runtime and no plugin. The kubelet advertises a fixed simulated inventory
  (the counts the device plugin would advertise, under every name of each resource:
  `resources.gpuReplicas` `resources.gpu` devices per GPU, 100 `resources.core` and 100
  `resources.memoryPercent` devices per GPU, one `resources.memory` device per memory unit unless the
  protocol keeps memory from kubelet; each GPU's memory is what it offers, times `rules.memoryScaling`)
  and writes the node devices annotation, the GPU labels and the
  memory unit label itself; admission allocates nothing and gives a container
  `NVIDIA_VISIBLE_DEVICES` from the pod's assignment annotation.
`health(pod)` gives, per container, the `allocatedResourcesStatus` kubelet reports (KEP-4680) for what
the pod holds, and `watch_health` the pods whose devices changed health, so the kubelet writes it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from runtimekit.cluster.kubelet.devicemanager import AdmissionError, DeviceManager
from runtimekit.kube.objects import Pod, ResourceStatus, annotations_of, meta
from runtimekit.model import Assignment, AssignmentError, NodeInventory
from runtimekit.model.gpu import offered_inventory
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.names import format_memory_unit

CORE_DEVICES_PER_GPU = 100  # what the device plugin advertises per GPU for resources.core
ContainerEnv = dict[str, dict[str, str]]  # container name -> environment the runtime would set
FAILED_PREPARE = "FailedPrepareDynamicResources"  # kubelet's Event reason (events.FailedPrepareDynamicResources)


class NodeDevices(Protocol):
    def capacity(self) -> dict[str, int]:
        """Every advertised device, per extended resource."""
        ...

    def allocatable(self) -> dict[str, int]:
        """The healthy devices, per extended resource."""
        ...

    def node_metadata(self) -> tuple[dict[str, str], dict[str, str]]:
        """Labels and annotations the kubelet itself writes on its Node (empty when a plugin publishes)."""
        ...

    def admit(self, pod: Pod) -> ContainerEnv:
        """Allocate the devices of every container; the environment per container. Raises AdmissionError
        with kubelet's reason and message; a pod that fails holds nothing afterwards. Raises
        `PrepareFailed` for a pod admitted whose DRA claims are not prepared yet: it holds its devices
        until the kubelet's retry succeeds or `release`."""
        ...

    def release(self, pod_uid: str) -> None:
        """Free the devices of a pod that ended or was deleted; idempotent."""
        ...

    def health(self, pod: Pod) -> dict[str, list[ResourceStatus]]:
        """Per container, the `allocatedResourcesStatus` of what the pod holds (empty without devices)."""
        ...

    def watch_health(self, listener: Callable[[set[str]], None]) -> None:
        """Call `listener` with the UIDs of pods whose held devices changed health."""
        ...


def resource_statuses(held: Mapping[str, Mapping[str, str]]) -> list[ResourceStatus]:
    """Resource name -> device ID -> health, as `allocatedResourcesStatus` entries in a stable order."""
    return [
        {"name": name, "resources": [{"resourceID": i, "health": h} for i, h in sorted(devices.items())]}
        for name, devices in sorted(held.items())
    ]


class PrepareFailed(AdmissionError):
    """The pod is admitted (its device-plugin devices held) but its ResourceClaims could not be prepared:
    as kubelet does (a failed `PrepareDynamicResources` fails the pod's sync, not its admission), the
    kubelet keeps it Pending and calls `retry` with the pod's latest manifest after a back-off, until it
    returns the containers' environment; `retry` raises PrepareFailed again while it still fails."""

    def __init__(self, message: str, retry: Callable[[Pod], ContainerEnv]) -> None:
        super().__init__(FAILED_PREPARE, message)
        self.retry = retry


class PluginDevices:
    """See the module docstring."""

    def __init__(self, manager: DeviceManager) -> None:
        self.manager = manager

    def capacity(self) -> dict[str, int]:
        return self.manager.capacity()

    def allocatable(self) -> dict[str, int]:
        return self.manager.allocatable()

    def node_metadata(self) -> tuple[dict[str, str], dict[str, str]]:
        return {}, {}

    def admit(self, pod: Pod) -> ContainerEnv:
        options = self.manager.admit_pod(pod)
        return {name: dict(opts.envs) for name, opts in options.items() if opts.envs}

    def release(self, pod_uid: str) -> None:
        self.manager.remove_pod(pod_uid)

    def health(self, pod: Pod) -> dict[str, list[ResourceStatus]]:
        held = self.manager.container_health(str(meta(pod).get("uid", "")))
        return {container: resource_statuses(resources) for container, resources in held.items()}

    def watch_health(self, listener: Callable[[set[str]], None]) -> None:
        self.manager.on_health.append(listener)


class DirectDevices:
    """See the module docstring."""

    def __init__(self, inventory: NodeInventory, protocol: KitProtocol, memory_unit_mib: int = 0) -> None:
        self.inventory = offered_inventory(inventory, protocol.rules.memory_scaling)  # as the runtime offers it
        self.protocol = protocol
        self.memory_unit_mib = memory_unit_mib or protocol.memory_unit_mib  # MiB per resources.memory device

    def capacity(self) -> dict[str, int]:
        protocol, gpus = self.protocol, self.inventory.gpus
        unit = self.memory_unit_mib
        counts = {
            "gpu": protocol.resources.gpu_replicas * len(gpus),
            "core": CORE_DEVICES_PER_GPU * len(gpus),
            "memory": sum(g.memory_mib // unit for g in gpus),
            "memoryPercent": CORE_DEVICES_PER_GPU * len(gpus),
        }
        if not protocol.resources.memory_advertised:
            del counts["memory"]
        return {name: count for kind, count in counts.items() for name in protocol.names(kind)}

    def allocatable(self) -> dict[str, int]:
        return self.capacity()

    def node_metadata(self) -> tuple[dict[str, str], dict[str, str]]:
        labels = {
            self.protocol.labels.gpu_model: self.inventory.model,
            self.protocol.labels.gpu_count: str(len(self.inventory.gpus)),
            self.protocol.labels.memory_unit: format_memory_unit(self.memory_unit_mib),
        }
        return labels, {self.protocol.annotations.node_devices: self.inventory.to_annotation()}

    def admit(self, pod: Pod) -> ContainerEnv:
        text = annotations_of(pod).get(self.protocol.annotations.assignment)
        if not text:
            return {}
        try:
            assignment = Assignment.from_annotation(str(text))
        except AssignmentError:
            return {}
        return {
            name: {"NVIDIA_VISIBLE_DEVICES": ",".join(s.uuid for s in shares)}
            for name, shares in assignment.containers.items()
            if shares
        }

    def release(self, pod_uid: str) -> None:
        return None

    def health(self, pod: Pod) -> dict[str, list[ResourceStatus]]:
        return {}  # no device IDs are allocated here

    def watch_health(self, listener: Callable[[set[str]], None]) -> None:
        return None
