"""The `AdmissionReview` a webhook is sent, and what its answer may say (kube-apiserver's
`webhook/request`).

`review_request` writes `admission.k8s.io/v1` (or `v1beta1`, the first version the webhook lists
that the server knows) with the resource and kind the webhook's rules matched (`resource`, `kind`)
and the ones the client used (`requestResource`, `requestKind`). `verify_response` checks the answer
as kube-apiserver does and returns a `Verdict`; a malformed answer raises `InvalidResponse` with
kube-apiserver's words (`expected response.uid="…", got "…"`, `webhook returned response.patch but
not response.patchType`, ...), which the dispatcher treats as a failure to call the webhook. Pure.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, cast

from runtimekit.cluster.apiserver.admission.attributes import Attributes, Kind, Resource
from runtimekit.kube.objects import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    GroupVersionKind,
    GroupVersionResource,
    Status,
)

VERSIONS = ("v1", "v1beta1")
JSON_PATCH = "JSONPatch"


class InvalidResponse(ValueError):
    """The webhook's answer is not a valid AdmissionReview response."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    patch: bytes = b""
    patch_type: str = ""
    status: Status | None = None
    warnings: tuple[str, ...] = field(default=())


def review_version(accepted: tuple[str, ...]) -> str:
    """The AdmissionReview version to send; InvalidResponse when the webhook takes none we write."""
    for version in accepted:
        if version in VERSIONS:
            return version
    raise InvalidResponse("webhook does not accept known AdmissionReview versions (v1, v1beta1)")


def _gvr(resource: Resource) -> GroupVersionResource:
    return {"group": resource.group, "version": resource.version, "resource": resource.resource}


def _gvk(kind: Kind) -> GroupVersionKind:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


def review_request(uid: str, version: str, at: Attributes, resource: Resource, kind: Kind) -> AdmissionReview:
    """The review for one webhook: `resource` and `kind` as its rules matched the request."""
    user = at.user
    request: AdmissionRequest = {
        "uid": uid,
        "kind": _gvk(kind),
        "resource": _gvr(resource),
        "requestKind": _gvk(at.kind),
        "requestResource": _gvr(at.resource),
        "name": at.name,
        "namespace": at.namespace,
        "operation": at.operation,
        "userInfo": {"username": user.username, "uid": user.uid, "groups": list(user.groups)},
        "object": at.obj,
        "oldObject": at.old,
        "dryRun": at.dry_run,
        "options": at.options,
    }
    if at.subresource:
        request["subResource"] = at.subresource
        request["requestSubResource"] = at.subresource
    return {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview", "request": request}


def _patch(response: AdmissionResponse, mutating: bool, version: str) -> tuple[bytes, str]:
    text, patch_type = response.get("patch"), response.get("patchType")
    if not mutating:
        if text:
            raise InvalidResponse("validating webhook may not return response.patch")
        if patch_type is not None:
            raise InvalidResponse("validating webhook may not return response.patchType")
        return b"", ""
    try:
        patch = base64.b64decode(text or "", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidResponse("response.patch is not valid base64") from None
    if version == "v1beta1":
        return patch, JSON_PATCH if patch else ""
    if patch and patch_type is None:
        raise InvalidResponse("webhook returned response.patch but not response.patchType")
    if not patch and patch_type is not None:
        raise InvalidResponse("webhook returned response.patchType but not response.patch")
    if patch_type is not None and not patch_type:
        raise InvalidResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
    return patch, patch_type or ""


def verify_response(uid: str, version: str, mutating: bool, body: Any) -> Verdict:
    if not isinstance(body, dict):
        raise InvalidResponse("the response is not an AdmissionReview object")
    review = cast(AdmissionReview, body)
    response = review.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    if version == "v1":
        if response.get("uid") != uid:
            raise InvalidResponse(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        if got != "admission.k8s.io/v1, Kind=AdmissionReview":
            raise InvalidResponse(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    patch, patch_type = _patch(response, mutating, version)
    status = response.get("status")
    warnings = tuple(w for w in response.get("warnings") or () if isinstance(w, str))
    shown = status if isinstance(status, dict) else None
    return Verdict(bool(response.get("allowed")), patch, patch_type, shown, warnings)
