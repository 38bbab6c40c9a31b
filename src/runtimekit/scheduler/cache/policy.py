"""API objects the policy plugins read, as framework values: PodDisruptionBudgets (`pdb`), ResourceQuotas
(`resourcequota`) and the PodGroup fields of `sla` and `resourcequota`. Pure functions; an unreadable
field is left out (logged by the caller), never raised, so one bad object stops nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from runtimekit.kube.objects import meta
from runtimekit.model.quantity import parse_quantity
from runtimekit.scheduler.framework.arguments import ArgumentError, go_duration
from runtimekit.scheduler.framework.policy import (
    DisruptionBudget,
    LabelRequirement,
    LabelSelector,
    NamespaceQuota,
)

log = logging.getLogger(__name__)
# Volcano's PodGroup annotations for the sla plugin, the first found wins
SLA_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
# Quota names that mean a resource's requests (Kubernetes' quota treats `cpu` as `requests.cpu`)
_NATIVE = ("cpu", "memory", "ephemeral-storage")


def label_selector(raw: object) -> LabelSelector | None:
    """A metav1.LabelSelector; None when absent or not a mapping."""
    if not isinstance(raw, Mapping):
        return None
    labels = raw.get("matchLabels") or {}
    expressions = []
    for item in raw.get("matchExpressions") or []:
        if isinstance(item, Mapping) and item.get("key"):
            values = tuple(str(v) for v in item.get("values") or [])
            expressions.append(LabelRequirement(str(item["key"]), str(item.get("operator", "In")), values))
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(labels, Mapping) else ()
    return LabelSelector(pairs, tuple(expressions))


def _int_or_percent(value: object) -> int | str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def disruption_budget(obj: Mapping[str, Any]) -> DisruptionBudget:
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    processed = "observedGeneration" in status or isinstance(allowed, int)  # a disruption controller wrote it
    return DisruptionBudget(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        selector=label_selector(spec.get("selector")),
        allowed=(allowed if isinstance(allowed, int) else 0) if processed else None,
        min_available=_int_or_percent(spec.get("minAvailable")),
        max_unavailable=_int_or_percent(spec.get("maxUnavailable")),
        disrupted=frozenset(str(name) for name in (status.get("disruptedPods") or {})),
    )


def quantities(raw: object) -> dict[str, Fraction]:
    """A ResourceList as exact amounts; an unreadable entry is left out."""
    out: dict[str, Fraction] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                out[str(name)] = parse_quantity(value)
            except ValueError:
                log.warning("quantity %s=%r cannot be read; left out", name, value)
    return out


def namespace_quota(obj: Mapping[str, Any]) -> NamespaceQuota:
    """A ResourceQuota: `status.hard` (what the quota controller enforces), else `spec.hard`, and
    `status.used` when a quota controller has written it (None otherwise)."""
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    used = status.get("used")
    return NamespaceQuota(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        hard=quantities(status.get("hard") or spec.get("hard")),
        used=quantities(used) if isinstance(used, Mapping) else None,
    )


def pod_usage(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """What a running pod counts against a ResourceQuota, by quota name: `pods` and `count/pods`,
    `requests.<r>` and `limits.<r>` (and the bare `cpu`, `memory`, `ephemeral-storage`), from its
    containers (a container without requests requests its limits, as Kubernetes defaults them)."""
    spec = pod.get("spec") or {}
    totals: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for kind in ("requests", "limits"):
        summed: dict[str, Fraction] = {}
        for container in spec.get("containers") or []:
            for name, amount in _container(container, kind).items():
                summed[name] = summed.get(name, Fraction(0)) + amount
        for container in spec.get("initContainers") or []:  # init containers run one at a time
            for name, amount in _container(container, kind).items():
                summed[name] = max(summed.get(name, Fraction(0)), amount)
        for name, amount in summed.items():
            totals[f"{kind}.{name}"] = amount
            if kind == "requests" and name in _NATIVE:
                totals[name] = amount
    return totals


def _container(container: object, kind: str) -> dict[str, Fraction]:
    if not isinstance(container, Mapping):
        return {}
    resources = container.get("resources") or {}
    limits = quantities(resources.get("limits"))
    if kind == "limits":
        return limits
    return {**limits, **quantities(resources.get("requests"))}


def add_usage(pods: Iterable[Mapping[str, Any]]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for pod in pods:
        for name, amount in pod_usage(pod).items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def waiting_time(group: Mapping[str, Any] | None) -> float | None:
    """A PodGroup's sla-waiting-time in seconds (Volcano's annotations); None when absent or bad."""
    annotations = meta(group or {}).get("annotations") or {}
    for key in SLA_ANNOTATIONS:
        if key in annotations:
            try:
                seconds = go_duration(str(annotations[key]))
            except ArgumentError as exc:
                log.warning("PodGroup %s: %s: %s", meta(group or {}).get("name"), key, exc)
                continue
            if seconds > 0:
                return seconds
    return None


def quota_request(group: Mapping[str, Any] | None) -> dict[str, Fraction] | None:
    """A PodGroup's minResources by name as written, with each request also under its quota names
    (`cpu` as `requests.cpu`, `requests.example.com/foo` as `example.com/foo`); None without them."""
    raw = ((group or {}).get("spec") or {}).get("minResources")
    if not raw:
        return None
    amounts = quantities(raw)
    out = dict(amounts)
    for name, amount in amounts.items():
        if name.startswith("requests."):
            out.setdefault(name.removeprefix("requests."), amount)
        elif not name.startswith(("limits.", "count/")) and name != "pods":
            out.setdefault(f"requests.{name}", amount)
    return out
