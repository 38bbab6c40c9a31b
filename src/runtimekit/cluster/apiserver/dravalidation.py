"""What kube-apiserver's resource.k8s.io validation refuses that clients notice
(pkg/apis/resource/validation), on the stored (v1) form: a claim's (or a template's claim's)
requests need a unique name and exactly one of `exactly` and `firstAvailable`; an exact request or
an alternative needs a `deviceClassName`, an `allocationMode` of ExactCount or All, a positive
`count` only with ExactCount; every CEL selector (of a request or a DeviceClass) must compile; a
constraint names existing requests; a claim's spec cannot change once created. Answered as 422 with
kube's field paths. Pure; called by `operations.Operations.validate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtimekit.cluster.apiserver.errors import Cause, field_forbidden, field_invalid, field_required, field_unsupported
from runtimekit.kube.objects import JsonObject
from runtimekit.kube.semantics import dracel

_MODES = ("All", "ExactCount")
_NOT_A_REQUEST = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"


def _selectors(selectors: object, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, selector in enumerate(selectors if isinstance(selectors, list) else []):
        expression = str(((selector or {}).get("cel") or {}).get("expression", ""))
        where = f"{path}[{i}].cel.expression"
        if not expression:
            causes.append(field_required(where))
            continue
        try:
            dracel.compile_selector(expression)
        except dracel.SelectorError as exc:
            causes.append(field_invalid(where, expression, str(exc)))
    return causes


def _exact(request: JsonObject, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not request.get("deviceClassName"):
        causes.append(field_required(f"{path}.deviceClassName"))
    mode = request.get("allocationMode") or "ExactCount"
    if mode not in _MODES:
        causes.append(field_unsupported(f"{path}.allocationMode", mode, _MODES))
    count = request.get("count")
    if count is not None:
        if mode == "All":
            causes.append(field_forbidden(f"{path}.count", "must not be specified when allocationMode is All"))
        elif not isinstance(count, int) or count < 1:
            causes.append(field_invalid(f"{path}.count", count, "must be greater than zero"))
    return causes + _selectors(request.get("selectors"), f"{path}.selectors")


def check_claim_spec(spec: object, path: str) -> list[Cause]:
    devices = (spec.get("devices") if isinstance(spec, Mapping) else None) or {}
    requests: Sequence[Any] = devices.get("requests") or []
    causes: list[Cause] = []
    names: list[str] = []
    for i, request in enumerate(requests):
        where = f"{path}.devices.requests[{i}]"
        name = str(request.get("name") or "")
        if not name:
            causes.append(field_required(f"{where}.name"))
        elif name in names:
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{where}.name"))
        names.append(name)
        exact, alternatives = request.get("exactly"), request.get("firstAvailable")
        if (exact is None) == (not alternatives):
            causes.append(field_required(where, "exactly one of `exactly` or `firstAvailable` is required"))
        if isinstance(exact, dict):
            causes += _exact(exact, f"{where}.exactly")
        for j, alternative in enumerate(alternatives or []):
            sub = f"{where}.firstAvailable[{j}]"
            if not alternative.get("name"):
                causes.append(field_required(f"{sub}.name"))
            names.append(f"{name}/{alternative.get('name', '')}")
            causes += _exact(alternative, sub)
    for i, constraint in enumerate(devices.get("constraints") or []):
        for j, named in enumerate(constraint.get("requests") or []):
            if named not in names:
                where = f"{path}.devices.constraints[{i}].requests[{j}]"
                causes.append(
                    field_invalid(
                        where,
                        named,
                        _NOT_A_REQUEST,
                    )
                )
    return causes


def check(kind: str, obj: JsonObject, old: JsonObject | None) -> list[Cause]:
    """Causes for a resource.k8s.io object of `kind` (empty when valid)."""
    if kind == "ResourceClaim":
        if old is not None and old.get("spec") != obj.get("spec"):
            return [field_invalid("spec", "", "field is immutable")]
        return check_claim_spec(obj.get("spec"), "spec")
    if kind == "ResourceClaimTemplate":
        return check_claim_spec((obj.get("spec") or {}).get("spec"), "spec.spec")
    if kind == "DeviceClass":
        return _selectors((obj.get("spec") or {}).get("selectors"), "spec.selectors")
    return []
