"""API objects the policy plugins read, as framework values: PodDisruptionBudgets (`pdb`), ResourceQuotas
(`resourcequota`) and the PodGroup fields of `sla` and `resourcequota`. Pure functions; an unreadable
field is left out (logged by the caller), never raised, so one bad object stops nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from fractions import Fraction

from runtimekit.kube.objects import (
    Container,
    IntOrString,
    LabelSelector,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PodSpec,
    ResourceQuota,
    ResourceRequirements,
    meta,
    object_key,
)
from runtimekit.kube.semantics import intstr
from runtimekit.kube.semantics.labels import NOTHING, Selector, SelectorError, label_selector
from runtimekit.kube.semantics.quantity import parse_quantity
from runtimekit.kube.semantics.resources import pod_amounts
from runtimekit.scheduler.framework.arguments import ArgumentError, go_duration
from runtimekit.scheduler.framework.policy import DisruptionBudget, NamespaceQuota

log = logging.getLogger(__name__)
# Volcano's PodGroup annotations for the sla plugin, the first found wins
SLA_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")
# Quota names that mean a resource's requests (Kubernetes' quota treats `cpu` as `requests.cpu`)
_NATIVE = ("cpu", "memory", "ephemeral-storage")


def _selector(obj: PodDisruptionBudget, raw: LabelSelector | None) -> Selector:
    """A budget's `spec.selector`; one that does not parse selects nothing (as kube-scheduler skips it)."""
    try:
        return label_selector(raw, "spec.selector")
    except SelectorError as exc:
        log.warning("PodDisruptionBudget %s: %s; it selects no pod", object_key(obj), exc)
        return NOTHING


def _int_or_percent(obj: PodDisruptionBudget, name: str, raw: object) -> IntOrString | None:
    if raw is None:
        return None
    try:
        return intstr.int_or_percent(raw)
    except ValueError as exc:
        log.warning("PodDisruptionBudget %s: spec.%s: %s; left out", object_key(obj), name, exc)
        return None


def disruption_budget(obj: PodDisruptionBudget) -> DisruptionBudget:
    m, spec, status = meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    processed = "observedGeneration" in status or isinstance(allowed, int)  # a disruption controller wrote it
    return DisruptionBudget(
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        selector=_selector(obj, spec.get("selector")),
        allowed=(allowed if isinstance(allowed, int) else 0) if processed else None,
        min_available=_int_or_percent(obj, "minAvailable", spec.get("minAvailable")),
        max_unavailable=_int_or_percent(obj, "maxUnavailable", spec.get("maxUnavailable")),
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


def namespace_quota(obj: ResourceQuota) -> NamespaceQuota:
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


def pod_usage(pod: Pod) -> dict[str, Fraction]:
    """What a running pod counts against a ResourceQuota, by quota name: `pods` and `count/pods`,
    `requests.<r>` and `limits.<r>` (and the bare `cpu`, `memory`, `ephemeral-storage`), from Kubernetes'
    PodRequests and PodLimits (a container without requests requests its limits, as Kubernetes
    defaults them; the overhead adds to every request, and to the limits that are set)."""
    spec: PodSpec = pod.get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    init = [c for c in spec.get("initContainers") or [] if isinstance(c, Mapping)]
    overhead = quantities(spec.get("overhead"))
    requests = pod_amounts(containers, init, _requests, _add, _peak, _NONE, overhead=overhead or None)
    limits = pod_amounts(containers, init, _limits, _add, _peak, _NONE)
    limits = {name: amount + overhead.get(name, Fraction(0)) for name, amount in limits.items()}
    totals: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for kind, summed in (("requests", requests), ("limits", limits)):
        for name, amount in summed.items():
            totals[f"{kind}.{name}"] = amount
            if kind == "requests" and name in _NATIVE:
                totals[name] = amount
    return totals


_NONE: dict[str, Fraction] = {}


def _resources(container: Container) -> ResourceRequirements:
    resources = container.get("resources")
    return resources if isinstance(resources, Mapping) else {}


def _requests(container: Container) -> dict[str, Fraction]:
    resources = _resources(container)
    return {**quantities(resources.get("limits")), **quantities(resources.get("requests"))}


def _limits(container: Container) -> dict[str, Fraction]:
    return quantities(_resources(container).get("limits"))


def _add(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {name: a.get(name, Fraction(0)) + b.get(name, Fraction(0)) for name in {**a, **b}}


def _peak(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {name: max(a.get(name, Fraction(0)), b.get(name, Fraction(0))) for name in {**a, **b}}


def add_usage(pods: Iterable[Pod]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for pod in pods:
        for name, amount in pod_usage(pod).items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def waiting_time(group: PodGroup | None) -> float | None:
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


def quota_request(group: PodGroup | None) -> dict[str, Fraction] | None:
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
