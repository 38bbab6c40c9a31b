"""Which container kubelet is admitting, from kubelet's own PodResources: the exact answer to "whose
Allocate is this?" (docs/architecture.md, the scheduler → node handoff).

kubelet's Allocate names device IDs only. But kubelet admits one pod at a time, and it adds the pod
to its pod manager before admitting it (`HandlePodAdditions`: `podManager.AddPod`, then
`canAdmitPod`, whose device handler calls Allocate per container in spec order and per resource),
while a container's devices of a resource are recorded only after that resource's Allocate has
returned. So, during an Allocate of `size` devices of `resource`, PodResources `List` shows the
pod being admitted, and its first container (spec order) that asks for this resource without
holding devices of it is the one the call is for. Every pod admitted earlier already holds its
devices; a pod kubelet has not reached yet is not listed at all. Pods listed without devices that
are not being admitted are ones kubelet rejected: on 1.34+ `List` shows only active pods, on older
kubelets the plugin leaves out the pods whose Allocate it refused itself.
Pure functions over the API server's pods and kubelet's listing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from runtimekit.api.podresources_client import ListedPod
from runtimekit.deviceplugin.matching import FINISHED, container_amount
from runtimekit.kube.objects import Container, Pod, meta

Admitting = tuple[str, str, str, str]  # (pod uid, namespace, name, container)


def admitting(
    pods: Iterable[Pod],
    listing: Sequence[ListedPod],
    resource: str,
    size: int,
    refused: Collection[str] = (),
) -> list[Admitting]:
    """The containers kubelet may be allocating `size` devices of `resource` for: for each pod of the
    API server that kubelet lists (and whose Allocate this plugin did not refuse), its first
    container in spec order that asks for `resource` and holds no devices of it yet, if that
    container asks for exactly `size`. One entry, unless an older kubelet also lists a pod it
    rejected before any Allocate."""
    listed = {pod.key: pod for pod in listing}
    out: list[Admitting] = []
    for pod in pods:
        m = meta(pod)
        uid = str(m.get("uid", ""))
        key = (str(m.get("namespace", "default")), str(m.get("name", "")))
        entry = listed.get(key)
        if entry is None or uid in refused or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        container = _next_container(pod, entry, resource)
        if container is not None and container_amount(container, resource) == size:
            out.append((uid, key[0], key[1], str(container.get("name", ""))))
    return out


def _next_container(pod: Pod, entry: ListedPod, resource: str) -> Container | None:
    """The first container of the pod (spec order) asking for `resource` that kubelet lists without it."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(container, Mapping) or container_amount(container, resource) <= 0:
            continue
        held = entry.container(str(container.get("name", "")))
        if held is None or not held.devices.get(resource):
            return container
    return None
