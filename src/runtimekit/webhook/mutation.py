"""What the webhook adds to a new pod that asks for the kit's GPU resources, as RFC 6902 operations.

- Standalone mode: a pod that names no scheduler, or `default-scheduler`, gets the kit's
  (`schedulerName` of the protocol), as HAMi's webhook gives pods `hami-scheduler`; a pod naming any
  other scheduler keeps it. Extender mode leaves every pod to kube-scheduler.
- Under HAMi's names, HAMi's webhook rule: an app container whose limits give GPU memory, cores or a
  memory percentage but no GPU count gets `nvidia.com/gpu: 1` (HAMi's `DefaultGPUNum`), so that
  kubelet allocates it (HAMi's memory is not a resource kubelet knows).
Under HAMi's names a pod or namespace labelled `hami.io/webhook: ignore` is left alone (the namespace
through the configuration's namespaceSelector, as HAMi's chart does). Pure.
"""

from __future__ import annotations

from runtimekit.kube.objects import JsonObject, Pod, labels_of
from runtimekit.webhook.settings import DEFAULT_SCHEDULER, HAMI_OPT_OUT, WebhookSettings


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901): `~` and `/` inside a part are escaped."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def opted_out(pod: Pod, settings: WebhookSettings) -> bool:
    key, value = HAMI_OPT_OUT
    return settings.hami and labels_of(pod).get(key) == value


def _count_defaults(pod: Pod, settings: WebhookSettings) -> list[JsonObject]:
    protocol = settings.protocol
    shares = {n for kind in ("core", "memory", "memoryPercent") for n in protocol.names(kind)}
    counts = set(protocol.names("gpu"))
    operations: list[JsonObject] = []
    for index, container in enumerate((pod.get("spec") or {}).get("containers") or ()):
        limits = (container.get("resources") or {}).get("limits") or {}
        if shares.intersection(limits) and not counts.intersection(limits):
            path = pointer("spec", "containers", str(index), "resources", "limits", protocol.resources.gpu)
            operations.append({"op": "add", "path": path, "value": "1"})
    return operations


def asks_for_gpus(pod: Pod, settings: WebhookSettings) -> bool:
    spec = pod.get("spec") or {}
    for container in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        resources = container.get("resources") or {}
        names = (*(resources.get("limits") or {}), *(resources.get("requests") or {}))
        if any(settings.protocol.manages(name) for name in names):
            return True
    return False


def pod_patch(pod: Pod, settings: WebhookSettings) -> list[JsonObject]:
    """The operations for a pod being created (none for a pod that asks for no GPU)."""
    if opted_out(pod, settings) or not asks_for_gpus(pod, settings):
        return []
    operations = _count_defaults(pod, settings) if settings.hami else []
    spec = pod.get("spec") or {}
    named = spec.get("schedulerName")
    wanted = settings.scheduler_for_gpu_pods
    if named in (None, "", DEFAULT_SCHEDULER) and wanted != (named or DEFAULT_SCHEDULER):
        op = "add" if named is None else "replace"
        operations.append({"op": op, "path": "/spec/schedulerName", "value": wanted})
    return operations
