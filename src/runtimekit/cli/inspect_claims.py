"""The GPU shares that DRA ResourceClaims hold, for `runtimekit inspect`: a claim allocated a device whose
ResourceSlice publishes a `uuid` attribute (the kit's plugin and NVIDIA's driver do) holds part of
that GPU, as a device-plugin pod's assignment does.

Kubernetes keeps the two halves apart: a ResourceSlice carries each device's capacity (`core`, percent
of the GPU, and `memory`), a claim's `status.allocation` what it consumes (`consumedCapacity`, KEP-5075;
none: the device whole). `claim_shares` joins them into the inspect view's `PodShare`s, so a GPU's row
shows claims beside pods and its FREE columns say what is left to both paths. The share is named after
the claim's first consumer (`reservedFor`, else the claim itself while no pod uses it), its container
column `resourceclaim/<name>`. Pure; caller: `inspect_cmd.run`, through `inspect_view.build_view`.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtimekit.cli.inspect_view import PodShare
from runtimekit.kube.objects import meta
from runtimekit.kube.objects.dra import Device, ResourceClaim, ResourceSlice
from runtimekit.kube.semantics.quantity import memory_mib, parse_quantity
from runtimekit.model.request import MILLI_PER_GPU

CLAIM_PREFIX = "resourceclaim/"


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


def claim_shares(claims: Iterable[ResourceClaim], slices: Iterable[ResourceSlice]) -> dict[str, list[PodShare]]:
    """GPU UUID -> the shares allocated claims hold on it (see the module docstring)."""
    devices = _devices(slices)
    shares: dict[str, list[PodShare]] = {}
    for claim in sorted(claims, key=lambda c: (meta(c).get("namespace", ""), meta(c).get("name", ""))):
        status = claim.get("status", {})
        namespace, name = str(meta(claim).get("namespace", "")), str(meta(claim).get("name", ""))
        users = [str(r.get("name", "")) for r in status.get("reservedFor", []) if r.get("resource") == "pods"]
        for result in status.get("allocation", {}).get("devices", {}).get("results", []):
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            if key not in devices:
                continue
            uuid, whole_mib = devices[key]
            consumed = result.get("consumedCapacity", {})
            core = int(parse_quantity(consumed["core"]) * MILLI_PER_GPU / 100) if "core" in consumed else MILLI_PER_GPU
            memory = memory_mib(consumed["memory"]) if "memory" in consumed else whole_mib
            owner = users[0] if users else name
            shares.setdefault(uuid, []).append(PodShare(namespace, owner, CLAIM_PREFIX + name, core, memory))
    return shares
