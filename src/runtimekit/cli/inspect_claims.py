"""The GPU shares that DRA ResourceClaims hold, for `runtimekit inspect`: a claim allocated a device whose
ResourceSlice publishes a `uuid` attribute (the kit's plugin and NVIDIA's driver do) holds part of
that GPU, as a device-plugin pod's assignment does.

Kubernetes keeps the two halves apart: a ResourceSlice carries each device's capacity (`core`, percent
of the GPU, and `memory`), a claim's `status.allocation` what it consumes (`consumedCapacity`, KEP-5075;
none: the device whole). `claim_shares` joins them into the inspect view's `PodShare`s (`claim` set), so
a GPU's row shows claims beside pods and its FREE columns say what is left to both paths. A share is
named after the one container that uses it (of the pods in `reservedFor` whose `resources.claims` name
the claim, or that request of it), as the exporter names its usage (`runtime/claimusers.py`), so the
usage columns match; a claim several containers share, or none yet, is named after its first consumer
(else the claim) with no container. Pure; caller: `inspect_cmd.run`, through `inspect_view.build_view`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from runtimekit.cli.inspect_view import PodShare
from runtimekit.kube.objects import Pod, meta
from runtimekit.kube.objects.dra import Device, DeviceRequestAllocationResult, ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.podclaims import claim_users
from runtimekit.kube.semantics.quantity import memory_mib, parse_quantity
from runtimekit.model.request import MILLI_PER_GPU


def _uuid(device: Device) -> str:
    attributes = device.get("attributes", {})
    for name in ("uuid", *(n for n in attributes if n.endswith("/uuid"))):
        text = attributes.get(name, {}).get("string", "")
        if text:
            return str(text)
    return ""


def _devices(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str, str], tuple[str, int]]:
    """(driver, pool, device) -> (GPU UUID, memory MiB) of every device that names a GPU."""
    found: dict[tuple[str, str, str], tuple[str, int]] = {}
    for item in slices:
        spec = item.get("spec", {})
        driver, pool = spec.get("driver", ""), spec.get("pool", {}).get("name", "")
        for device in spec.get("devices", []):
            uuid = _uuid(device)
            if uuid:
                memory = device.get("capacity", {}).get("memory", {}).get("value", 0)
                found[(driver, pool, device.get("name", ""))] = (uuid, memory_mib(memory))
    return found


def _holder(claim: ResourceClaim, request: str, pods: Mapping[tuple[str, str], Pod]) -> tuple[str, str]:
    """(pod, container) the share is listed under (see the module docstring)."""
    namespace, name = str(meta(claim).get("namespace", "")), str(meta(claim).get("name", ""))
    users = [
        str(r.get("name", "")) for r in claim.get("status", {}).get("reservedFor", []) if r.get("resource") == "pods"
    ]
    containers = [
        (user, container)
        for user in users
        if (namespace, user) in pods
        for container, used, wanted in claim_users(pods[(namespace, user)])
        if used == name and wanted in ("", request)
    ]
    if len(containers) == 1:
        return containers[0]
    return (users[0] if users else name), ""


def _share(result: DeviceRequestAllocationResult, uuid_memory: tuple[str, int]) -> tuple[int, int]:
    consumed = result.get("consumedCapacity", {})
    core = int(parse_quantity(consumed["core"]) * MILLI_PER_GPU / 100) if "core" in consumed else MILLI_PER_GPU
    return core, memory_mib(consumed["memory"]) if "memory" in consumed else uuid_memory[1]


def claim_shares(
    claims: Iterable[ResourceClaim], slices: Iterable[ResourceSlice], pods: Iterable[Pod] = ()
) -> dict[str, list[PodShare]]:
    """GPU UUID -> the shares allocated claims hold on it (see the module docstring)."""
    devices = _devices(slices)
    by_name = {(str(meta(p).get("namespace", "")), str(meta(p).get("name", ""))): p for p in pods}
    shares: dict[str, list[PodShare]] = {}
    for claim in sorted(claims, key=lambda c: (meta(c).get("namespace", ""), meta(c).get("name", ""))):
        namespace, name = str(meta(claim).get("namespace", "")), str(meta(claim).get("name", ""))
        for result in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            if key not in devices:
                continue
            core, memory = _share(result, devices[key])
            pod, container = _holder(claim, result.get("request", "").split("/")[0], by_name)
            share = PodShare(namespace, pod, container, core, memory, claim=name)
            shares.setdefault(devices[key][0], []).append(share)
    return shares
