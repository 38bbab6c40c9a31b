"""A prepared ResourceClaim's allocation seen as the containers that use it, for usage and metrics.

The DRA plugin books a claim in the runtime as a pod: the claim's namespace, name and uid stand for the
pod and the request for the container (`draplugin.service`), because a claim is prepared before any
container exists and may be shared. What runs on the GPU, though, is the pod's container, whose
processes `cgroups` finds by the real pod's uid. `as_consumers` turns each claim allocation
(`kubelet_dra.CLAIM_RESOURCE`) into one allocation per container of the node's pods whose
`resources.claims` name that claim (all of it, or that request): same grants, the container's pod and
name, so the usage attribution (`usage.attribute`, the simulated model) and the exporter's
per-container families read it as they read a device-plugin container.

`shared`: with True every consumer gets the claim's grants (usage: each container's own processes);
with False a claim used by more than one container stays under the claim, so that what is granted is
counted once (the allocation families and their node sums). A claim no listed pod uses yet (the pod
list is older than the claim) stays under the claim. Pure; caller: `service.NodeRuntime.exporter_data`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from runtimekit.api.kubelet_dra import CLAIM_RESOURCE
from runtimekit.kube.objects import Pod, meta
from runtimekit.kube.semantics.podclaims import claim_users
from runtimekit.runtime.allocations import Allocation, PodRef

_Users = dict[tuple[str, str], list[tuple[PodRef, str, str]]]  # (namespace, claim) -> (pod, container, request)


def _users(pods: Mapping[str, Pod]) -> _Users:
    users: _Users = {}
    for uid, pod in sorted(pods.items(), key=lambda item: (str(meta(item[1]).get("name", "")), item[0])):
        if not pod.get("spec", {}).get("resourceClaims"):
            continue
        ref = PodRef(str(meta(pod).get("namespace", "")), str(meta(pod).get("name", "")), uid)
        for container, claim, request in claim_users(pod):
            users.setdefault((ref.namespace, claim), []).append((ref, container, request))
    return users


def as_consumers(allocations: Sequence[Allocation], pods: Mapping[str, Pod], shared: bool) -> list[Allocation]:
    """`allocations` with each claim allocation replaced by its consumers' (see the module docstring)."""
    if not any(CLAIM_RESOURCE in a.resource_names for a in allocations):
        return list(allocations)
    users = _users(pods)
    out: list[Allocation] = []
    for allocation in allocations:
        claim = allocation.pod
        found = [
            (pod, container)
            for pod, container, request in users.get((claim.namespace, claim.name), [])
            if not request or request == allocation.container
        ]
        if CLAIM_RESOURCE not in allocation.resource_names or not found or (len(found) > 1 and not shared):
            out.append(allocation)
            continue
        out.extend(replace(allocation, pod=pod, container=container) for pod, container in found)
    return out
