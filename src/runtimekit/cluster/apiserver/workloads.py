"""Validation of the apps/v1 workloads: Deployments, ReplicaSets and StatefulSets.

What kube-apiserver's apps validation refuses and the workload controllers would trip over: a
missing or empty selector, a selector that does not select the template's labels, negative
replicas, a template that is not a valid pod (or does not restart `Always`), Deployment fenceposts
that are both zero or not a count or percentage, unknown strategy and policy values, and on update a
changed selector (immutable) or, for StatefulSets, changes outside the fields kube lets change.
Messages are kube's, so `kubectl apply` prints what it prints against a real cluster. Pure
functions; called by `operations.Api.validate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from runtimekit.cluster.apiserver.errors import (
    Cause,
    field_forbidden,
    field_invalid,
    field_required,
    field_unsupported,
)
from runtimekit.cluster.apiserver.validation import check_pod
from runtimekit.kube.objects import Deployment, DeploymentSpec, ReplicaSet, StatefulSet, StatefulSetSpec, WorkloadSpec
from runtimekit.kube.semantics import intstr
from runtimekit.kube.semantics.labels import SelectorProblem, label_selector_or_nothing, selector_problems

Workload = Deployment | ReplicaSet | StatefulSet
KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})
_STS_MUTABLE = frozenset(
    {"replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"}
)
STS_UPDATE_MSG = (
    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
)


def _go_map(labels: Mapping[str, str]) -> str:
    inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
    return f"map[string]string{{{inner}}}"


def _selector(kind: str, spec: WorkloadSpec, template_labels: dict[str, str]) -> list[Cause]:
    selector = spec.get("selector")
    if selector is None:
        return [field_required("spec.selector")]
    problems = selector_problems(selector, "spec.selector")
    if problems:
        return [_cause(problem) for problem in problems]
    parsed = label_selector_or_nothing(selector)
    if parsed.everything:
        return [field_invalid("spec.selector", "null", f"empty selector is invalid for {kind.lower()}")]
    if not parsed.matches(template_labels):
        why = f"Invalid value: {_go_map(template_labels)}: `selector` does not match template `labels`"
        return [Cause("FieldValueInvalid", why, "spec.template.metadata.labels")]
    return []


def _cause(problem: SelectorProblem) -> Cause:
    if problem.kind == "Required":
        return field_required(problem.path, problem.detail)
    if problem.kind == "Forbidden":
        return field_forbidden(problem.path, problem.detail)
    return field_invalid(problem.path, problem.value, problem.detail)


def _template(spec: WorkloadSpec) -> list[Cause]:
    template = spec.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        return [field_required("spec.template.spec.containers")]
    causes = [Cause(c.reason, c.message, f"spec.template.{c.field}") for c in check_pod(template)]
    policy = template["spec"].get("restartPolicy", "Always")
    if policy != "Always":
        causes.append(field_unsupported("spec.template.spec.restartPolicy", policy, ["Always"]))
    return causes


def _replicas(spec: WorkloadSpec) -> list[Cause]:
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return [field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")]
    return []


def _deployment_strategy(spec: DeploymentSpec) -> list[Cause]:
    strategy = spec.get("strategy") or {}
    kind = strategy.get("type", "RollingUpdate")
    if kind not in ("RollingUpdate", "Recreate"):
        return [field_unsupported("spec.strategy.type", kind, ["Recreate", "RollingUpdate"])]
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            why = "may not be specified when strategy `type` is 'Recreate'"
            return [field_forbidden("spec.strategy.rollingUpdate", why)]
        return []
    rolling = rolling or {}
    causes: list[Cause] = []
    for name in ("maxSurge", "maxUnavailable"):
        value = rolling.get(name, "25%")
        try:
            if intstr.scaled_value(value, 100, round_up=True) < 0:
                raise ValueError("must be greater than or equal to 0")
        except ValueError as exc:
            causes.append(field_invalid(f"spec.strategy.rollingUpdate.{name}", value, str(exc)))
    if (
        not causes
        and intstr.is_zero(rolling.get("maxSurge", "25%"))
        and intstr.is_zero(rolling.get("maxUnavailable", "25%"))
    ):
        value = rolling.get("maxUnavailable")
        causes.append(
            field_invalid("spec.strategy.rollingUpdate.maxUnavailable", value, "may not be 0 when `maxSurge` is 0")
        )
    return causes


def _statefulset_policies(spec: StatefulSetSpec) -> list[Cause]:
    causes: list[Cause] = []
    policy = spec.get("podManagementPolicy", "OrderedReady")
    if policy not in ("OrderedReady", "Parallel"):
        causes.append(field_unsupported("spec.podManagementPolicy", policy, ["OrderedReady", "Parallel"]))
    update = spec.get("updateStrategy") or {}
    if update.get("type", "RollingUpdate") not in ("RollingUpdate", "OnDelete"):
        causes.append(field_unsupported("spec.updateStrategy.type", update.get("type"), ["OnDelete", "RollingUpdate"]))
    partition = (update.get("rollingUpdate") or {}).get("partition", 0)
    if not isinstance(partition, int) or partition < 0:
        path = "spec.updateStrategy.rollingUpdate.partition"
        causes.append(field_invalid(path, partition, "must be greater than or equal to 0"))
    return causes


def check_workload(obj: Workload, old: Workload | None) -> list[Cause]:
    """The causes a Deployment, ReplicaSet or StatefulSet (new, or `old` updated to it) is refused for."""
    kind = str(obj.get("kind", ""))
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [field_required("spec.selector")]
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    causes = _selector(kind, spec, template_labels) + _template(spec) + _replicas(spec)
    if kind == "Deployment":
        causes += _deployment_strategy(cast(DeploymentSpec, spec))
    if kind == "StatefulSet":
        causes += _statefulset_policies(cast(StatefulSetSpec, spec))
    if old is not None:
        causes += _update(kind, old.get("spec") or {}, spec)
    return causes


def _update(kind: str, old: WorkloadSpec, new: WorkloadSpec) -> list[Cause]:
    if old.get("selector") != new.get("selector"):
        return [field_invalid("spec.selector", new.get("selector"), "field is immutable")]
    if kind == "StatefulSet":
        masked_old = {k: v for k, v in old.items() if k not in _STS_MUTABLE}
        masked_new = {k: v for k, v in new.items() if k not in _STS_MUTABLE}
        if masked_old != masked_new:
            return [field_forbidden("spec", STS_UPDATE_MSG)]
    return []
