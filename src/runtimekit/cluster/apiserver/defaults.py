"""Defaults the real API server (defaulting plus the default admission plugins) fills in on create.

Clients see these fields in what they read back: a pod gets `schedulerName: default-scheduler`,
`restartPolicy`, container `imagePullPolicy`, requests defaulted from limits, the default
not-ready/unreachable tolerations and a `Pending` status with its QoS class; a namespace gets its
`kubernetes.io/metadata.name` label; workloads get kube's apps/v1 defaults (strategies, replicas,
the pod template's defaults), on update too (`apply_update_defaults`); claims and volumes a Pending
phase and the Filesystem volume mode (volumes the Retain reclaim policy), StorageClasses the Delete
reclaim policy and the Immediate binding mode. Both mutate the object they
are given (a fresh copy owned by the caller). Pure functions; called by `operations.py` on create.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import TypeVar, cast

from runtimekit.kube.objects import (
    Container,
    DaemonSet,
    Deployment,
    JsonObject,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodSpec,
    PriorityClass,
    ReplicaSet,
    StatefulSet,
    StorageClass,
    Toleration,
)

DEFAULT_SCHEDULER = "default-scheduler"
_NOT_READY_TOLERATIONS: tuple[Toleration, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)


def _image_pull_policy(image: str) -> str:
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "IfNotPresent"
    tag = name.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _container(container: Container) -> None:
    if isinstance(container.get("image"), str):
        container.setdefault("imagePullPolicy", _image_pull_policy(container["image"]))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    if isinstance(resources, dict):
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for name, amount in limits.items():
                requests.setdefault(name, amount)
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def pod_spec(spec: PodSpec) -> None:
    """Defaulting of a PodSpec (also inside workload templates)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    for containers in (spec.get("containers"), spec.get("initContainers")):
        for container in containers or []:
            if isinstance(container, dict):
                _container(container)


def qos_class(spec: PodSpec) -> str:
    """Guaranteed, Burstable or BestEffort, from cpu and memory requests and limits."""
    both = (spec.get("containers"), spec.get("initContainers"))
    containers = [c for found in both for c in found or [] if isinstance(c, dict)]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        any_set = any_set or bool(requests or limits)
        if set(limits) != {"cpu", "memory"} or any(str(requests.get(k)) != str(v) for k, v in limits.items()):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _pod(obj: Pod) -> None:
    spec = obj.setdefault("spec", {})
    pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    tolerations = spec.setdefault("tolerations", [])
    keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
    tolerations.extend(t.copy() for t in _NOT_READY_TOLERATIONS if t["key"] not in keys)
    obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def _template(obj: Deployment | ReplicaSet | StatefulSet | DaemonSet | JsonObject) -> None:
    """Defaults of a workload's pod template (a Job is still a `JsonObject` here)."""
    template = obj.setdefault("spec", {}).setdefault("template", {})
    if isinstance(template.get("spec"), dict):
        pod_spec(template["spec"])


def _deployment(obj: Deployment) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict) and strategy.setdefault("type", "RollingUpdate") == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            rolling.setdefault("maxSurge", "25%")
            rolling.setdefault("maxUnavailable", "25%")
    _template(obj)


def _replicaset(obj: ReplicaSet) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)
    _template(obj)


def _statefulset(obj: StatefulSet) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    _template(obj)


def _daemonset(obj: DaemonSet) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    _template(obj)


def _job(obj: JsonObject) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
        for key, value in (
            ("batch.kubernetes.io/controller-uid", uid),
            ("batch.kubernetes.io/job-name", name),
            ("controller-uid", uid),
            ("job-name", name),
        ):
            labels.setdefault(key, value)
    _template(obj)
    spec["template"].setdefault("spec", {}).setdefault("restartPolicy", "Never")


def _cronjob(obj: JsonObject) -> None:
    """batch/v1 SetDefaults_CronJob, and the pod defaults of its job template."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    template = spec.setdefault("jobTemplate", {})
    if isinstance(template.get("spec"), dict) and isinstance(template["spec"].get("template"), dict):
        _template(template)


def _namespace(obj: Namespace) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj["status"] = {"phase": "Active"}
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def _service(obj: JsonObject) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
        digest = hashlib.sha1(obj["metadata"]["uid"].encode()).digest()
        spec["clusterIP"] = f"10.96.{digest[0]}.{max(1, digest[1] % 255)}"
    if spec.get("clusterIP"):
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    obj["status"] = {"loadBalancer": {}}


def _secret(obj: JsonObject) -> None:
    """Opaque by default; `stringData` is write-only: kube's v1 conversion folds it into `data`
    (base64, its keys winning over data's), on create and update alike."""
    obj.setdefault("type", "Opaque")
    plain = obj.pop("stringData", None)
    if isinstance(plain, dict) and plain:
        data = obj.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        for key, value in plain.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _claim(obj: PersistentVolumeClaim) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj["status"] = {"phase": "Pending"}


def _volume(obj: PersistentVolume) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    obj["status"] = {"phase": "Pending"}


def _storage_class(obj: StorageClass) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def _priority_class(obj: PriorityClass) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _webhooks(obj: JsonObject) -> None:
    """admissionregistration/v1's defaults for each webhook of a configuration."""
    for hook in obj.get("webhooks") or ():
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if obj.get("kind") == "MutatingWebhookConfiguration":
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or ():
            rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)


_Kind = TypeVar("_Kind")


def _of_kind(defaulter: Callable[[_Kind], None]) -> Callable[[JsonObject], None]:
    """A defaulter of one kind, called with an object `apply_defaults` found to be of that kind."""
    return cast(Callable[[JsonObject], None], defaulter)


_BY_KIND: dict[str, Callable[[JsonObject], None]] = {
    "Pod": _of_kind(_pod),
    "Deployment": _of_kind(_deployment),
    "DaemonSet": _of_kind(_daemonset),
    "StatefulSet": _of_kind(_statefulset),
    "ReplicaSet": _of_kind(_replicaset),
    "Job": _job,
    "CronJob": _cronjob,
    "Namespace": _of_kind(_namespace),
    "Service": _service,
    "Secret": _secret,
    "PriorityClass": _of_kind(_priority_class),
    "PersistentVolumeClaim": _of_kind(_claim),
    "PersistentVolume": _of_kind(_volume),
    "StorageClass": _of_kind(_storage_class),
    "MutatingWebhookConfiguration": _webhooks,
    "ValidatingWebhookConfiguration": _webhooks,
}


def apply_defaults(group: str, kind: str, obj: JsonObject) -> None:
    """Fill in server defaults for a new object of a built-in kind (custom kinds get none)."""
    if group in ("", "apps", "batch", "scheduling.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io"):
        defaulter = _BY_KIND.get(kind)
        if defaulter is not None:
            defaulter(obj)


_ON_UPDATE = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("", "Secret"),
        ("batch", "CronJob"),
    }
)


def apply_update_defaults(group: str, kind: str, obj: JsonObject) -> None:
    """Defaults on update, where kube applies them too: the workload kinds, whose controllers compare
    the stored template with what they created from it, and Secrets (`stringData`)."""
    if (group, kind) in _ON_UPDATE:
        _BY_KIND[kind](obj)
