"""Validation the real API server does that clients notice: names, labels, pods, bindings.

Each `check_*` returns a list of `Cause`s (empty when valid); `operations.py` turns a non-empty
list into 422 Invalid with the kind and name, as `kubectl` prints it. The messages are apimachinery's.
Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from runtimekit.cluster.apiserver.errors import (
    Cause,
    field_forbidden,
    field_invalid,
    field_required,
    field_unsupported,
)
from runtimekit.cluster.apiserver.resourcerules import check_containers
from runtimekit.cluster.apiserver.resources import NameRule
from runtimekit.kube.objects import (
    Binding,
    Container,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
    ResourceStatus,
)
from runtimekit.kube.semantics.names import check_qualified_name

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(rf"^{_LABEL}$")
_SUBDOMAIN_RE = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_LABEL_1035_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_MAX_ANNOTATIONS = 256 * 1024

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


# label and annotation keys repeat across objects: validate each distinct key once
_key_problem = lru_cache(maxsize=16384)(check_qualified_name)


def name_problems(name: str, rule: NameRule) -> list[str]:
    """Why `name` is not a valid name under `rule` (empty when it is)."""
    if rule is NameRule.PATH_SEGMENT:
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{ch}'" for ch in "/%" if ch in name]
    limit = 253 if rule is NameRule.SUBDOMAIN else 63
    pattern, message = {
        NameRule.SUBDOMAIN: (_SUBDOMAIN_RE, SUBDOMAIN_MSG),
        NameRule.LABEL: (_LABEL_RE, LABEL_MSG),
        NameRule.LABEL_1035: (_LABEL_1035_RE, LABEL_1035_MSG),
    }[rule]
    out = [f"must be no more than {limit} characters"] if len(name) > limit else []
    if not pattern.match(name):
        out.append(message)
    return out


def check_name(name: object, rule: NameRule, path: str = "metadata.name") -> list[Cause]:
    if not isinstance(name, str) or not name:
        return [field_required(path, "name or generateName is required")]
    return [field_invalid(path, name, why) for why in name_problems(name, rule)]


def check_metadata(meta: ObjectMeta) -> list[Cause]:
    """Labels, annotations and finalizers of any object."""
    causes: list[Cause] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        return [field_invalid("metadata.labels", labels, "must be a map of strings")]
    for key, value in labels.items():
        if problem := _key_problem(str(key)):
            causes.append(field_invalid("metadata.labels", key, problem))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE_RE.match(value):
            causes.append(field_invalid("metadata.labels", value, LABEL_VALUE_MSG))
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        return [*causes, field_invalid("metadata.annotations", annotations, "must be a map of strings")]
    size = 0
    for key, value in annotations.items():
        if problem := _key_problem(str(key)):
            causes.append(field_invalid("metadata.annotations", key, problem))
        if not isinstance(value, str):
            causes.append(field_invalid(f"metadata.annotations[{key}]", value, "must be a string"))
        size += len(str(key)) + len(str(value))
    if size > _MAX_ANNOTATIONS:
        causes.append(Cause("FieldValueTooLong", "Too long: must have at most 262144 bytes", "metadata.annotations"))
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        causes.append(field_invalid("metadata.finalizers", finalizers, "must be a list of strings"))
    return causes


def _containers(containers: list[Container] | None, field: str, required: bool) -> list[Cause]:
    if containers is None or containers == []:
        return [field_required(f"spec.{field}")] if required else []
    if not isinstance(containers, list):
        return [field_invalid(f"spec.{field}", containers, "must be a list")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, container in enumerate(containers):
        where = f"spec.{field}[{i}]"
        if not isinstance(container, Mapping):
            causes.append(field_invalid(where, container, "must be an object"))
            continue
        name = container.get("name")
        if not isinstance(name, str) or not name:
            causes.append(field_required(f"{where}.name"))
        else:
            causes += [field_invalid(f"{where}.name", name, why) for why in name_problems(name, NameRule.LABEL)]
            if name in seen:
                causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{where}.name"))
            seen.add(name)
        if not container.get("image"):
            causes.append(field_required(f"{where}.image"))
    return causes


def check_pod(pod: Pod | PodTemplateSpec) -> list[Cause]:
    """The causes a pod, or a workload's pod template, is refused for."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return [field_required("spec.containers")]
    causes = _containers(spec.get("containers"), "containers", required=True)
    causes += _containers(spec.get("initContainers"), "initContainers", required=False)
    causes += check_containers(spec)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        causes.append(field_unsupported("spec.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    node = spec.get("nodeName")
    if node:
        causes += [field_invalid("spec.nodeName", node, why) for why in name_problems(str(node), NameRule.SUBDOMAIN)]
    return causes


POD_UPDATE_MSG = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _mutable_masked(spec: PodSpec) -> dict[str, object]:
    masked: dict[str, object] = dict(spec)
    for field in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates"):
        masked.pop(field, None)
    for field in ("containers", "initContainers"):
        containers = masked.get(field)
        if isinstance(containers, list):
            masked[field] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, Mapping) else c for c in containers
            ]
    return masked


HEALTH_VALUES = ("Healthy", "Unhealthy", "Unknown")
CLAIM_STATUS_MSG = (
    "must match one of the container's resource claims in a format 'claim:<claimName>/<request>' or "
    "'claim:<claimName>' if request is empty"
)


def _status_names(container: Container) -> tuple[set[str], set[str]]:
    """The resource names and the `claim:<claim>[/<request>]` names a container's status may report."""
    resources = container.get("resources") or {}
    claims = {
        f"claim:{c.get('name', '')}" + (f"/{c['request']}" if c.get("request") else "")
        for c in resources.get("claims") or []
    }
    return set(resources.get("requests") or {}), claims


def _reported(where: str, reported: ResourceStatus, container: Container | None) -> list[Cause]:
    causes: list[Cause] = []
    name = str(reported.get("name", ""))
    if container is not None:  # a status without its container is not this check's to refuse
        requests, claims = _status_names(container)
        if name.startswith("claim:") and name not in claims:
            causes.append(field_invalid(f"{where}.name", name, CLAIM_STATUS_MSG))
        elif not name.startswith("claim:") and name not in requests:
            causes.append(field_invalid(f"{where}.name", name, "must match one of the container's resource requests"))
    seen: set[str] = set()
    for k, health in enumerate(reported.get("resources") or []):
        value, resource_id = str(health.get("health", "")), str(health.get("resourceID", ""))
        if value not in HEALTH_VALUES:
            causes.append(field_unsupported(f"{where}.resources[{k}].health", value, HEALTH_VALUES))
        if resource_id in seen:
            path = f"{where}.resources[{k}].resourceID"
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{resource_id}"', path))
        seen.add(resource_id)
    return causes


def check_allocated_resources_status(pod: Pod) -> list[Cause]:
    """kube's validateContainerStatusAllocatedResourcesStatus (KEP-4680): each reported resource is one
    the container asks for (a request, or `claim:` one of its claims), its resource IDs are unique and
    each health is Healthy, Unhealthy or Unknown; ephemeral containers report none."""
    spec: PodSpec = pod.get("spec") or {}
    status: PodStatus = pod.get("status") or {}
    causes: list[Cause] = []
    for field, statuses, containers in (
        ("containerStatuses", status.get("containerStatuses"), spec.get("containers")),
        ("initContainerStatuses", status.get("initContainerStatuses"), spec.get("initContainers")),
    ):
        by_name = {str(c.get("name", "")): c for c in containers or []}
        for i, container_status in enumerate(statuses or []):
            container = by_name.get(str(container_status.get("name", "")))
            for j, reported in enumerate(container_status.get("allocatedResourcesStatus") or []):
                causes += _reported(f"status.{field}[{i}].allocatedResourcesStatus[{j}]", reported, container)
    for i, container_status in enumerate(status.get("ephemeralContainerStatuses") or []):
        if container_status.get("allocatedResourcesStatus"):
            where = f"status.ephemeralContainerStatuses[{i}].allocatedResourcesStatus"
            causes.append(field_forbidden(where, "must not be specified in container status"))
    return causes


def _reported_health(pod: Pod) -> list[object]:
    status: PodStatus = pod.get("status") or {}
    statuses = [
        *(status.get("containerStatuses") or []),
        *(status.get("initContainerStatuses") or []),
        *(status.get("ephemeralContainerStatuses") or []),
    ]
    return [s.get("allocatedResourcesStatus") for s in statuses]


def check_pod_update(old: Pod, new: Pod) -> list[Cause]:
    """A pod's spec is immutable except images, deadlines, added tolerations and scheduling gates; the
    status's device health must name what the containers ask for."""
    causes = check_pod(new)
    if _reported_health(new) != _reported_health(old):
        causes += check_allocated_resources_status(new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _mutable_masked(old_spec) != _mutable_masked(new_spec):
        causes.append(field_forbidden("spec", POD_UPDATE_MSG))
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = new_spec.get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        causes.append(
            field_forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")
        )
    return causes


IMMUTABLE_SET = "field is immutable when `immutable` is set"


def check_config_update(kind: str, old: Mapping[str, object], new: Mapping[str, object]) -> list[Cause]:
    """kube's ValidateConfigMapUpdate / ValidateSecretUpdate: a Secret's type never changes; once
    `immutable: true`, neither `immutable` nor the data may change."""
    causes: list[Cause] = []
    if kind == "Secret" and old.get("type") != new.get("type"):
        causes.append(field_invalid("type", new.get("type"), "field is immutable"))
    if old.get("immutable") is not True:
        return causes
    if new.get("immutable") is not True:
        causes.append(field_forbidden("immutable", IMMUTABLE_SET))
    for field in ("data", "binaryData") if kind == "ConfigMap" else ("data",):
        if (old.get(field) or {}) != (new.get(field) or {}):
            causes.append(field_forbidden(field, IMMUTABLE_SET))
    return causes


def check_binding(binding: Binding) -> list[Cause]:
    target = binding.get("target")
    if not isinstance(target, Mapping) or not target.get("name"):
        return [field_required("target.name")]
    kind = target.get("kind")
    if kind not in (None, "", "Node"):
        return [field_unsupported("target.kind", kind, ["Node", "<empty>"])]
    return []
