"""Which running containers hold GPU devices the runtime has no allocation for, and how to rebuild them.

A checkpoint deleted by hand, lost with its journal after `kill -9`, or cut short by a crash would
otherwise make the runtime forget containers that still run on its GPUs; it would then book their
GPUs for someone else. So at every start and every reconciliation the runtime compares its
allocations with the evidence that a container holds devices:
- kubelet's PodResources: the container holds device IDs of one of the kit's resources (the
  strongest: kubelet records them only after a successful Allocate); without PodResources,
- the pod's `allocated` annotation, which the device plugin writes after each Allocate.
A container with evidence and no allocation is *missing*. It is rebuilt from its pod's assignment
annotation (the GPUs and shares the device plugin forwarded at Allocate: what the container sees),
and where the pod has none (or an unreadable one), from the device IDs kubelet gave it: a
`resources.gpu` ID is a whole GPU, `resources.core` IDs count percent and `resources.memory` IDs
memory units of the GPU before their `::`, a static MIG ID is that MIG device. What cannot be
rebuilt (the pod is not in the API server's list, a dynamic MIG slot whose start kubelet's IDs do
not tell) is *unaccounted*: reported, and the runtime is not OK while there is any.
Pure functions; the service books the result (`AllocationBook.restore`) and reports it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from runtimekit.api.podresources_client import ListedPod
from runtimekit.kube.objects import Pod, annotations_of
from runtimekit.model import Assignment, AssignmentError
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.backend import DeviceInfo
from runtimekit.runtime.pods import is_finished, pod_ref

FROM_ASSIGNMENT = "the pod's assignment"
FROM_KUBELET = "kubelet's device IDs"


@dataclass(frozen=True)
class Missing:
    """A container that holds devices without an allocation, and the allocation rebuilt for it."""

    allocation: Allocation
    source: str  # FROM_ASSIGNMENT or FROM_KUBELET


@dataclass(frozen=True)
class Evidence:
    """A container that holds GPU devices by kubelet's (or the device plugin's) word."""

    namespace: str
    name: str
    container: str
    devices: Mapping[str, tuple[str, ...]]  # resource -> device IDs (empty without PodResources)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} container {self.container}"


def evidence(
    api_pods: Sequence[Pod] | None, listing: Sequence[ListedPod] | None, protocol: KitProtocol
) -> list[Evidence]:
    """Containers holding devices of the kit's resources: kubelet's word when asked, else the plugin's."""
    if listing is not None:
        return [
            Evidence(pod.namespace, pod.name, c.name, {r: ids for r, ids in c.devices.items() if ids})
            for pod in listing
            for c in pod.containers
            if any(protocol.manages(r) and ids for r, ids in c.devices.items())
        ]
    out = []
    for pod in api_pods or ():
        if is_finished(pod):
            continue
        ref = pod_ref(pod)
        text = annotations_of(pod).get(protocol.annotations.allocated)
        for container in _allocated_containers(text):
            out.append(Evidence(ref.namespace, ref.name, container, {}))
    return out


def missing_allocations(
    held: Collection[Allocation],
    proof: Iterable[Evidence],
    api_pods: Sequence[Pod] | None,
    devices: Sequence[DeviceInfo],
    node: str,
    protocol: KitProtocol,
    now_ms: int,
) -> tuple[list[Missing], list[str]]:
    """(allocations to rebuild, why each other container with devices stays unaccounted).
    `held`: the allocations the runtime has. A pod the API server shows finished is left out (kubelet
    frees its devices soon)."""
    known = {(pod_ref(p).namespace, pod_ref(p).name): p for p in api_pods or ()}
    keys = {a.key for a in held}
    names = {(a.pod.namespace, a.pod.name, a.container) for a in held}
    rebuilt: list[Missing] = []
    unaccounted: list[str] = []
    for item in proof:
        pod = known.get((item.namespace, item.name))
        if pod is not None and is_finished(pod):
            continue
        if pod is None and (item.namespace, item.name, item.container) in names:
            continue  # gone from the API server (or not asked), still held: the release follows kubelet
        if pod is None:
            where = "the API server could not be asked" if api_pods is None else "its pod is not in the API server"
            unaccounted.append(f"{item}: holds {_ids(item)} with no allocation, and {where}")
            continue
        ref = pod_ref(pod)
        if (ref.uid, item.container) in keys:
            continue
        found = _from_assignment(pod, ref, item, node, protocol, now_ms) or _from_kubelet(
            ref, item, devices, protocol, now_ms
        )
        if isinstance(found, Missing):
            rebuilt.append(found)
        else:
            unaccounted.append(f"{item}: holds {_ids(item)} with no allocation, and {found}")
    return rebuilt, unaccounted


def _ids(item: Evidence) -> str:
    ids = [i for values in item.devices.values() for i in values]
    return f"devices {', '.join(ids[:4])}{' …' if len(ids) > 4 else ''}" if ids else "GPU devices"


def _allocated_containers(text: object) -> list[str]:
    try:
        containers = json.loads(str(text))["containers"] if text else {}
        return [str(c) for c, resources in containers.items() if resources]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def _from_assignment(
    pod: Pod, ref: PodRef, item: Evidence, node: str, protocol: KitProtocol, now_ms: int
) -> Missing | None:
    text = annotations_of(pod).get(protocol.annotations.assignment)
    if text is None:
        return None
    try:
        assignment = Assignment.from_annotation(str(text))
    except AssignmentError:
        return None
    shares = assignment.containers.get(item.container, ()) if assignment.node == node else ()
    if not shares:
        return None
    grants = tuple(
        Grant(s.uuid, s.index, s.core_milli, s.memory_mib, s.parent_uuid or "", s.mig_profile, s.mig_start)
        for s in shares
    )
    ids = tuple(i for values in item.devices.values() for i in values)
    allocation = Allocation(ref, item.container, grants, now_ms, ids, tuple(item.devices))
    return Missing(allocation, FROM_ASSIGNMENT)


def _from_kubelet(
    ref: PodRef, item: Evidence, devices: Sequence[DeviceInfo], protocol: KitProtocol, now_ms: int
) -> Missing | str:
    """The allocation kubelet's device IDs describe, or why they describe none."""
    if not item.devices:
        return "neither its assignment nor kubelet's device IDs say which GPUs it has"
    names = protocol.resources
    gpus: dict[str, DeviceInfo] = {d.uuid: d for d in devices}
    migs = {m.uuid: (d, m) for d in devices for m in d.mig_devices}
    whole: set[str] = set()
    core: dict[str, int] = {}
    memory: dict[str, int] = {}
    grants: list[Grant] = []
    for resource, ids in item.devices.items():
        for device_id in ids:
            gpu = device_id.split("::", 1)[0]
            if resource.startswith(names.mig_prefix):
                found = migs.get(device_id)
                if found is None:
                    return f"kubelet's MIG device {device_id} does not name a MIG device this node has"
                parent, mig = found
                grants.append(Grant(mig.uuid, parent.index, 0, mig.memory_mib, parent.uuid, mig.profile, mig.start))
            elif gpu not in gpus:
                return f"kubelet's device {device_id} is on no GPU of this node"
            elif resource == names.gpu:
                whole.add(gpu)
            elif resource == names.core:
                core[gpu] = core.get(gpu, 0) + 10
            elif resource == names.memory:
                memory[gpu] = memory.get(gpu, 0) + protocol.memory_unit_mib
    for uuid in sorted(whole | set(core) | set(memory)):
        device = gpus[uuid]
        if uuid in whole:
            grants.append(Grant(uuid, device.index, 1000, device.memory_mib))
        else:
            milli = min(core.get(uuid, 0), 1000)
            mib = memory.get(uuid, milli * device.memory_mib // 1000)
            grants.append(Grant(uuid, device.index, milli, min(mib, device.memory_mib)))
    if not grants:
        return "kubelet's device IDs name none of the kit's resources"
    allocation = Allocation(ref, item.container, tuple(grants), now_ms, (), tuple(item.devices))
    return Missing(allocation, FROM_KUBELET)
