"""Conversion between `resource.k8s.io/v1` (the stored form) and `v1beta1`, as kube's
`pkg/apis/resource/v1beta1` conversion does for the two places their shapes differ:

- a claim's request: v1beta1 writes the request's fields flat (`deviceClassName`, `selectors`,
  `allocationMode`, `count`, `adminAccess`, `tolerations`, `capacity`) where v1 nests them under
  `exactly`; `firstAvailable` is the same in both;
- a slice's device: v1beta1 nests a device's fields under `basic`, v1 writes them flat.

`v1beta2` has v1's shape (only `apiVersion` differs) and needs nothing here. Claims, templates
(their `spec.spec`) and slices are converted; DeviceClasses are the same in all three. Pure
functions over the decoded JSON, called by `conversion.to_served`/`to_stored`.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.kube.objects import JsonObject

V1BETA1 = "resource.k8s.io/v1beta1"
_V1 = "resource.k8s.io/v1"
_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def _requests_to_v1(claim_spec: object) -> None:
    if not isinstance(claim_spec, dict):
        return
    for request in (claim_spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict) or request.get("firstAvailable"):
            continue
        exact = {f: request.pop(f) for f in _EXACT_FIELDS if f in request}
        request["exactly"] = exact


def _requests_to_v1beta1(claim_spec: object) -> None:
    if not isinstance(claim_spec, dict):
        return
    for request in (claim_spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        exact = request.pop("exactly", None)
        if isinstance(exact, Mapping):
            request.update(exact)


def _devices_to_v1(spec: object) -> None:
    if not isinstance(spec, dict):
        return
    for device in spec.get("devices") or []:
        basic = device.pop("basic", None) if isinstance(device, dict) else None
        if isinstance(basic, Mapping):
            device.update(basic)


def _devices_to_v1beta1(spec: object) -> None:
    if not isinstance(spec, dict):
        return
    for i, device in enumerate(spec.get("devices") or []):
        if isinstance(device, dict):
            rest = {k: v for k, v in device.items() if k != "name"}
            spec["devices"][i] = {"name": device.get("name", ""), "basic": rest}


def to_v1(obj: JsonObject) -> JsonObject:
    """A v1beta1 object (as written) in the v1 form the server stores. Changes `obj` in place."""
    kind = obj.get("kind")
    if kind == "ResourceClaim":
        _requests_to_v1(obj.get("spec"))
    elif kind == "ResourceClaimTemplate":
        _requests_to_v1((obj.get("spec") or {}).get("spec"))
    elif kind == "ResourceSlice":
        _devices_to_v1(obj.get("spec"))
    obj["apiVersion"] = _V1
    return obj


def to_v1beta1(obj: JsonObject) -> JsonObject:
    """A stored v1 object as v1beta1 serves it. Changes `obj` in place (callers pass a copy)."""
    kind = obj.get("kind")
    if kind == "ResourceClaim":
        _requests_to_v1beta1(obj.get("spec"))
    elif kind == "ResourceClaimTemplate":
        _requests_to_v1beta1((obj.get("spec") or {}).get("spec"))
    elif kind == "ResourceSlice":
        _devices_to_v1beta1(obj.get("spec"))
    obj["apiVersion"] = V1BETA1
    return obj
