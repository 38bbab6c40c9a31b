"""The webhook's answers: a `Decision` (allowed, with a JSONPatch and warnings, or refused with the
fields at fault) and the `AdmissionReview` response that carries it.

A refusal names each field as kube-apiserver's validation does (`spec.containers[0].resources.limits[
aliyun.com/gpu-core.percentage]: Invalid value: 150: …`); several are listed in brackets. The API
server prefixes the message with `admission webhook "NAME" denied the request: `. Pure.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from runtimekit.kube.objects import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    JsonObject,
    Status,
    StatusCause,
)


@dataclass(frozen=True)
class Problem:
    field: str
    reason: str  # FieldValueInvalid, FieldValueForbidden, FieldValueNotSupported
    message: str  # "Invalid value: 150: above 100 % of one GPU; …"

    def render(self) -> str:
        return f"{self.field}: {self.message}"


def invalid(path: str, value: object, why: str) -> Problem:
    shown = json.dumps(value) if isinstance(value, str) else str(value)
    return Problem(path, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def forbidden(path: str, why: str) -> Problem:
    return Problem(path, "FieldValueForbidden", f"Forbidden: {why}")


@dataclass(frozen=True)
class Decision:
    allowed: bool = True
    code: int = 200
    reason: str = ""
    problems: tuple[Problem, ...] = ()
    patch: tuple[JsonObject, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        rendered = [p.render() for p in self.problems]
        return rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"


ALLOW = Decision()


def refuse(problems: list[Problem]) -> Decision:
    """A refusal, 403 Forbidden as kube-apiserver's own admission plugins refuse (LimitRanger,
    ResourceQuota): kubectl prints it as `Error from server (Forbidden): … admission webhook "…" denied
    the request: <field>: …`, where a 422 would make it print only the causes, without the webhook."""
    return Decision(False, 403, "Forbidden", tuple(problems))


def respond(review: AdmissionReview, decision: Decision) -> AdmissionReview:
    """The answer to `review`, in the AdmissionReview version it came in."""
    request: AdmissionRequest = review.get("request") or {}
    response: AdmissionResponse = {"uid": request.get("uid", ""), "allowed": decision.allowed}
    if decision.patch:
        response["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
        response["patchType"] = "JSONPatch"
    if not decision.allowed:
        causes: list[StatusCause] = [
            {"reason": p.reason, "message": p.message, "field": p.field} for p in decision.problems
        ]
        status: Status = {
            "status": "Failure",
            "code": decision.code,
            "reason": decision.reason,
            "message": decision.message,
            "details": {"causes": causes},
        }
        response["status"] = status
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }
