"""What the webhook adds to a new pod that asks for the kit's GPU resources, as RFC 6902 operations.

- Standalone mode: a pod that names no scheduler, or `default-scheduler`, gets the kit's
  (`schedulerName` of the protocol), as HAMi's webhook gives pods `hami-scheduler`; a pod naming any
  other scheduler keeps it. Extender mode leaves every pod to kube-scheduler.
- Under HAMi's names, HAMi's webhook rule: an app container whose limits give GPU memory, cores or a
  memory percentage but no GPU count gets `nvidia.com/gpu: 1` (HAMi's `DefaultGPUNum`), so that
  kubelet allocates it (HAMi's memory is not a resource kubelet knows); a container with a GPU count
  and no cores whose memory is all of the card (a percentage of 100, or no memory) gets all of its
  cores, `nvidia.com/gpucores: 100` (HAMi's defaultExclusiveCoreIfNeeded); and a container whose limits
  give HAMi's task priority (`nvidia.com/priority`) gets `CUDA_TASK_PRIORITY` set to it, which
  HAMi-core reads (no scheduler or node counts the resource itself).
- With a RuntimeClass set (`--runtime-class-name`, HAMi's `runtimeClassName`), a GPU pod that names
  none gets it: on a node whose default container runtime is not NVIDIA's, that is what gives the
  container its GPUs.
- With `--overwrite-env` (HAMi's `overwriteEnv`), every container, init containers included, that asks
  for none of the kit's GPU resources gets `NVIDIA_VISIBLE_DEVICES=none` appended to its environment,
  in any pod, so NVIDIA's runtime shows it no GPU whatever its image says.
Under HAMi's names a pod or namespace labelled `hami.io/webhook: ignore` is left alone (the namespace
through the configuration's namespaceSelector, as HAMi's chart does). Pure.
"""

from __future__ import annotations

import contextlib

from runtimekit.kube.objects import Container, JsonObject, Pod, ResourceRequirements, labels_of
from runtimekit.kube.semantics.quantity import whole_number
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import HAMI_PRIORITY, HAMI_PRIORITY_ENV
from runtimekit.webhook.settings import DEFAULT_SCHEDULER, HAMI_OPT_OUT, WebhookSettings

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901): `~` and `/` inside a part are escaped."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def opted_out(pod: Pod, settings: WebhookSettings) -> bool:
    key, value = HAMI_OPT_OUT
    return settings.hami and labels_of(pod).get(key) == value


def _exclusive(resources: ResourceRequirements, protocol: KitProtocol, counted: bool) -> bool:
    """HAMi's defaultExclusiveCoreIfNeeded: a container with a GPU count (given, or just defaulted) and
    no cores, whose memory is all of the card (a percentage of 100, or no memory named), takes all of
    the card's cores too."""
    named = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    if not counted and not any(n in named for n in protocol.names("gpu")):
        return False
    if any(n in named for n in protocol.names("core")):
        return False
    percent = next((named[n] for n in protocol.names("memoryPercent") if n in named), None)
    if percent is not None:
        try:
            return whole_number(percent) == 100
        except ValueError:
            return False
    return not any(n in named for n in protocol.names("memory"))


def _count_defaults(pod: Pod, settings: WebhookSettings) -> list[JsonObject]:
    """HAMi's webhook defaults: a GPU count of 1 where a container names shares but no count, and all of
    the card's cores where its memory is all of the card (`_exclusive`)."""
    protocol = settings.protocol
    shares = {n for kind in ("core", "memory", "memoryPercent") for n in protocol.names(kind)}
    counts = set(protocol.names("gpu"))
    operations: list[JsonObject] = []
    for index, container in enumerate((pod.get("spec") or {}).get("containers") or ()):
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        counted = False
        if shares.intersection(limits) and not counts.intersection(limits):
            path = pointer("spec", "containers", str(index), "resources", "limits", protocol.resources.gpu)
            operations.append({"op": "add", "path": path, "value": "1"})
            counted = True
        if _exclusive(resources, protocol, counted):
            core = protocol.resources.core
            if "limits" in resources:
                path = pointer("spec", "containers", str(index), "resources", "limits", core)
                operations.append({"op": "add", "path": path, "value": "100"})
            else:
                path = pointer("spec", "containers", str(index), "resources", "limits")
                operations.append({"op": "add", "path": path, "value": {core: "100"}})
    return operations


def asks_for_gpus(pod: Pod, settings: WebhookSettings) -> bool:
    spec = pod.get("spec") or {}
    containers = (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
    return any(_container_asks(container, settings) for container in containers)


def _container_asks(container: Container, settings: WebhookSettings) -> bool:
    resources = container.get("resources") or {}
    names = (*(resources.get("limits") or {}), *(resources.get("requests") or {}))
    return any(settings.protocol.manages(name) for name in names)


def _env_entries(container: Container, settings: WebhookSettings, app: bool) -> list[JsonObject]:
    """The environment the webhook appends to one container: HAMi's task priority (an app container's,
    under HAMi's names) and, with `overwrite_env`, NVIDIA_VISIBLE_DEVICES=none where it asks for no GPU."""
    entries: list[JsonObject] = []
    value = ((container.get("resources") or {}).get("limits") or {}).get(HAMI_PRIORITY)
    if app and settings.hami and value is not None:
        with contextlib.suppress(ValueError):  # not a whole number: nothing to tell HAMi-core
            entries.append({"name": HAMI_PRIORITY_ENV, "value": str(whole_number(value))})
    if settings.overwrite_env and not _container_asks(container, settings):
        entries.append({"name": VISIBLE_DEVICES, "value": "none"})
    return entries


def _env(pod: Pod, settings: WebhookSettings) -> list[JsonObject]:
    """Operations appending `_env_entries` to each container (one `add` of the list where it has none)."""
    spec = pod.get("spec") or {}
    operations: list[JsonObject] = []
    for kind, listed in (("initContainers", spec.get("initContainers")), ("containers", spec.get("containers"))):
        for index, container in enumerate(listed or ()):
            entries = _env_entries(container, settings, kind == "containers")
            if not entries:
                continue
            if container.get("env"):
                path = pointer("spec", kind, str(index), "env", "-")
                operations += [{"op": "add", "path": path, "value": entry} for entry in entries]
            else:
                operations.append({"op": "add", "path": pointer("spec", kind, str(index), "env"), "value": entries})
    return operations


def pod_patch(pod: Pod, settings: WebhookSettings) -> list[JsonObject]:
    """The operations for a pod being created (none for a pod that asks for no GPU, unless
    `overwrite_env` hides GPUs from its containers)."""
    if opted_out(pod, settings):
        return []
    if not asks_for_gpus(pod, settings):
        return _env(pod, settings) if settings.overwrite_env else []
    operations = _count_defaults(pod, settings) if settings.hami else []
    operations += _env(pod, settings)
    spec = pod.get("spec") or {}
    if settings.runtime_class and not spec.get("runtimeClassName"):
        op = "replace" if "runtimeClassName" in spec else "add"
        operations.append({"op": op, "path": "/spec/runtimeClassName", "value": settings.runtime_class})
    named = spec.get("schedulerName")
    wanted = settings.scheduler_for_gpu_pods
    if named in (None, "", DEFAULT_SCHEDULER) and wanted != (named or DEFAULT_SCHEDULER):
        op = "add" if named is None else "replace"
        operations.append({"op": op, "path": "/spec/schedulerName", "value": wanted})
    return operations
