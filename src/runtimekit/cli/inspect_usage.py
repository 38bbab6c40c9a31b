"""What a node's exporter measures, for `runtimekit inspect`: one scrape of its /metrics, read into
per-GPU usage (compute utilisation, memory used, the exporter's health verdict and reason) keyed by
GPU UUID, and per container (memory used, SM utilisation, over its share) where the runtime
attributes GPU processes to containers. A node whose exporter cannot be reached keeps its granted
shares only, with the reason.
Where each node's exporter is: given on the command line, or found among the cluster's pods
(`discovered_exporters`).

`scrape` does the HTTP GET (stdlib, a short timeout: inspect is interactive); `read_usage` is pure
over the exposition text, so tests feed it what `runtimekit.exporter` serves. The families and their
labels are the exporter's (docs/user-guide/exporter.md). Called by `runtimekit.cli.inspect_cmd`.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from runtimekit.kube.objects import Pod, meta

UTILIZATION = "runtimekit_gpu_utilization_ratio"
MEMORY_USED = "runtimekit_gpu_memory_used_bytes"
HEALTHY = "runtimekit_gpu_healthy"
UNHEALTHY_REASON = "runtimekit_gpu_unhealthy_reason"
RUNTIME_UP = "runtimekit_runtime_up"
# per container (runtimekit.exporter.usage), where the runtime attributes GPU processes to containers
CONTAINER_MEMORY = "runtimekit_container_gpu_memory_used_bytes"
CONTAINER_UTILIZATION = "runtimekit_container_gpu_utilization_ratio"
CONTAINER_OVER = "runtimekit_container_over_share"
CONTAINER_FAMILIES = (CONTAINER_MEMORY, CONTAINER_UTILIZATION, CONTAINER_OVER)
DEFAULT_PORT = 9445  # deploy/exporter/03-daemonset.yaml


@dataclass(frozen=True)
class GpuUsage:
    utilization: float | None = None  # 0-1 over the exporter's last sample period
    memory_used_bytes: float | None = None
    healthy: bool | None = None  # the exporter's verdict (None: it said nothing)
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContainerUsage:
    """What one container's processes use of one grant (the exporter's `runtimekit_container_*`)."""

    memory_used_bytes: float | None = None
    utilization: float | None = None  # share of the GPU's SMs over the last interval (0-1)
    over_share: bool = False


ContainerKey = tuple[str, str, str, str]  # namespace, pod, container, device UUID (the MIG device's for a slice)


@dataclass(frozen=True)
class NodeUsage:
    """One exporter's answer: `gpus` by UUID, `containers` by ContainerKey (empty where the runtime
    attributes nothing); `error` says why there is none ("" when scraped)."""

    url: str
    gpus: dict[str, GpuUsage] = field(default_factory=dict)
    runtime_up: bool | None = None
    error: str = ""
    containers: dict[ContainerKey, ContainerUsage] = field(default_factory=dict)


def scrape(url: str, timeout_s: float = 3.0) -> NodeUsage:
    """GET `url` and read it; an unreachable or failing exporter is a NodeUsage with `error`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            text = answer.read().decode("utf-8", "replace")
    except (OSError, ValueError, urllib.error.URLError) as exc:
        return NodeUsage(url, error=f"cannot scrape {url}: {exc}")
    try:
        return read_usage(url, text)
    except ValueError as exc:
        return NodeUsage(url, error=f"{url} did not answer Prometheus text: {exc}")


def read_usage(url: str, text: str) -> NodeUsage:
    """The per-GPU usage in one exposition text. Raises ValueError for text that does not parse."""
    values: dict[str, dict[str, float]] = {UTILIZATION: {}, MEMORY_USED: {}, HEALTHY: {}}
    reasons: dict[str, list[str]] = {}
    per_container: dict[str, dict[ContainerKey, float]] = {name: {} for name in CONTAINER_FAMILIES}
    up: bool | None = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            uuid = sample.labels.get("uuid", "")
            if sample.name in per_container and uuid:
                labels = sample.labels
                key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""), uuid)
                per_container[sample.name][key] = sample.value
            elif sample.name in values and uuid:
                values[sample.name][uuid] = sample.value
            elif sample.name == UNHEALTHY_REASON and uuid and sample.value:
                reasons.setdefault(uuid, []).append(sample.labels.get("reason", ""))
            elif sample.name == RUNTIME_UP:
                up = sample.value == 1.0
    uuids = set().union(*values.values(), reasons)
    gpus = {
        uuid: GpuUsage(
            values[UTILIZATION].get(uuid),
            values[MEMORY_USED].get(uuid),
            None if uuid not in values[HEALTHY] else values[HEALTHY][uuid] == 1.0,
            tuple(sorted(reasons.get(uuid, []))),
        )
        for uuid in uuids
    }
    memory, utilization, over = (per_container[name] for name in CONTAINER_FAMILIES)
    containers = {
        key: ContainerUsage(memory.get(key), utilization.get(key), over.get(key) == 1.0)
        for key in set().union(memory, utilization, over)
    }
    return NodeUsage(url, gpus, up, containers=containers)


EXPORTER_LABELS = {"app.kubernetes.io/name": "lj-runtimekit", "app.kubernetes.io/component": "exporter"}


def discovered_exporters(pods: Iterable[Pod]) -> dict[str, str]:
    """Node name -> /metrics URL of the kit's exporter pods running there (deploy/exporter: their
    labels, pod IP and `prometheus.io/port`/`path` annotations, as Prometheus' pod discovery reads them)."""
    found: dict[str, str] = {}
    for pod in pods:
        m = meta(pod)
        labels = m.get("labels") or {}
        if any(labels.get(k) != v for k, v in EXPORTER_LABELS.items()):
            continue
        status = pod.get("status") or {}
        node, ip = str((pod.get("spec") or {}).get("nodeName") or ""), str(status.get("podIP") or "")
        if not node or not ip or status.get("phase") != "Running":
            continue
        annotations = m.get("annotations") or {}
        port = str(annotations.get("prometheus.io/port") or DEFAULT_PORT)
        path = str(annotations.get("prometheus.io/path") or "/metrics")
        host = f"[{ip}]" if ":" in ip else ip
        found[node] = f"http://{host}:{port}{path}"
    return found
