"""A claim-using pod's GPU request, as the device-plugin path would have it: for a pod whose claims
all ask the kit's GPU class (`gpu.runtimekit.aliyun.com`) for whole GPUs or for a share of one
(consumable capacity `core` in percent and `memory` in bytes), each request of each claim becomes a
GPU container of the pod's `PodRequest` (named `resourceclaim:<claim>/<request>`, a name no container
can have), as `gpu`, `gpu-core.percentage` and `gpu-memory` would give it. gpushare's fit and its
policies then choose the node and the GPU, the `dynamicresources` plugin allocates the device of
that GPU, and queues and quotas count the claims through the task's request.

Rules (docs/user-guide/dra.md): a request without capacity is `count` whole GPUs; with `core`
and/or `memory`, `count` GPUs with that share each. `memory` missing: in proportion to `core`, as the
device plugin's rule has it (all of it under a protocol whose `rules.memoryDefault` is `whole`);
`core` missing: all of the compute, as the device's `requestPolicy` default gives it. Anything else
(another class, selectors, `firstAvailable`, `allocationMode: All`, admin access, constraints,
capacities other than `core` and `memory`), a claim allocated already (or not made yet), or containers
asking the device plugin for GPUs as well, leaves the pod's request as it is: the allocator alone
places those claims, as before.

Callers: the scheduler cache's snapshot (pending pods) and bookings (bound pods' queue share), the
`dynamicresources` plugin (which request a container stands for).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from runtimekit.kube.objects import Pod, ResourceClaim
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.model import ContainerGpuRequest, GpuKind, GpuRequest, PodRequest, RequestError
from runtimekit.scheduler.kubesem.dra import pod_claims

KIT_CLASS = "gpu.runtimekit.aliyun.com"
CLAIM_CONTAINER = "resourceclaim:"
MIB = 1 << 20


def is_claim_container(name: str) -> bool:
    return name.startswith(CLAIM_CONTAINER)


def claim_container(key: str, request: str) -> str:
    return f"{CLAIM_CONTAINER}{key}/{request}"


def split_container(name: str) -> tuple[str, str]:
    """(claim key namespace/name, request name) of a claim container's name."""
    key, _, request = name[len(CLAIM_CONTAINER) :].rpartition("/")
    return key, request


def claim_gpus(
    pod: Pod, claims: Mapping[str, ResourceClaim], whole_memory: bool = False, allocated_too: bool = False
) -> tuple[ContainerGpuRequest, ...] | None:
    """The pod's claims as GPU containers, or None when they are not all the kit's simple GPU
    requests (see the module docstring). `allocated_too`: read claims allocated already as well (a
    bound pod's share of its queue)."""
    found = pod_claims(pod, claims)
    if found.waiting or not found.keys:
        return None
    out: list[ContainerGpuRequest] = []
    for key in found.keys:
        claim = claims[key]
        if not allocated_too and (claim.get("status") or {}).get("allocation") is not None:
            return None
        devices = (claim.get("spec") or {}).get("devices") or {}
        if devices.get("constraints"):
            return None
        for request in devices.get("requests") or []:
            gpu = _gpu(request.get("exactly"), whole_memory)
            if gpu is None:
                return None
            out.append(ContainerGpuRequest(claim_container(key, request.get("name", "")), gpu))
    return tuple(out) or None


def _gpu(exactly: object, whole_memory: bool) -> GpuRequest | None:
    if not isinstance(exactly, Mapping) or exactly.get("deviceClassName") != KIT_CLASS:
        return None
    if exactly.get("selectors") or exactly.get("adminAccess"):
        return None
    if exactly.get("allocationMode", "ExactCount") != "ExactCount":
        return None
    count = int(exactly.get("count") or 1)
    asked = (exactly.get("capacity") or {}).get("requests") or {}
    amounts: dict[str, object] = {}
    for name, value in asked.items():
        short = str(name).rpartition("/")[2]
        if short not in ("core", "memory") or ("/" in str(name) and not str(name).startswith(KIT_CLASS + "/")):
            return None
        amounts[short] = value
    try:
        if not amounts:
            return GpuRequest(GpuKind.WHOLE, count)
        core = math.ceil(parse_quantity(amounts.get("core", 100)) * 10)
        if "memory" in amounts:
            memory = math.ceil(parse_quantity(amounts["memory"]) / MIB)
            return GpuRequest(GpuKind.SHARE, count, core, memory)
        if whole_memory:
            return GpuRequest(GpuKind.SHARE, count, core, memory_percent=100)
        return GpuRequest(GpuKind.SHARE, count, core)
    except (RequestError, ValueError):
        return None  # out of range: the allocator says why


def with_claims(
    request: PodRequest, pod: Pod, claims: Mapping[str, ResourceClaim], whole_memory: bool, allocated_too: bool = False
) -> PodRequest:
    """The request with the pod's claims' GPUs (the same object when there are none to add, or when
    its containers ask the device plugin for GPUs too: one placement cannot tell their GPUs apart)."""
    if request.gpus:
        return request
    gpus = claim_gpus(pod, claims, whole_memory, allocated_too)
    return request if gpus is None else replace(request, gpus=request.gpus + gpus)
