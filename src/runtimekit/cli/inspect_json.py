"""`runtimekit inspect -o json`: the view as one JSON document, typed (these TypedDicts are its
schema, docs/user-guide/inspect.md#output). Every number is in the kit's units: core milli, memory
MiB, bytes used, utilisation 0-1. Called by `runtimekit.cli.inspect_cmd`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict

from runtimekit.cli.inspect_usage import ContainerUsage, NodeUsage
from runtimekit.cli.inspect_view import ClusterView, GpuView, NodeView, PodShare


class ContainerUsageJson(TypedDict):
    memoryUsedBytes: float | None
    utilization: float | None
    overShare: bool


class ShareJson(TypedDict):
    namespace: str
    pod: str
    container: str
    coreMilli: int
    memoryMiB: int
    migProfile: str
    migUUID: str
    claim: str  # the DRA ResourceClaim it is held through, "" for a device-plugin assignment
    usage: NotRequired[ContainerUsageJson]


class MigJson(TypedDict):
    profile: str
    start: int
    uuid: str
    pod: str


class GpuUsageJson(TypedDict):
    utilization: float | None
    memoryUsedBytes: float | None
    healthy: bool | None
    reasons: list[str]


class GpuJson(TypedDict):
    index: int
    uuid: str
    model: str
    healthy: bool
    migMode: str
    memoryMiB: int
    coreGrantedMilli: int
    memoryGrantedMiB: int
    coreFreeMilli: int
    memoryFreeMiB: int
    pods: list[ShareJson]
    mig: list[MigJson]
    usage: NotRequired[GpuUsageJson]


class IgnoredJson(TypedDict):
    namespace: str
    pod: str
    reason: str
    message: str


class ExporterJson(TypedDict):
    url: str
    error: str
    runtimeUp: bool | None


class NodeJson(TypedDict):
    name: str
    address: str
    ready: bool
    problem: str
    gpus: list[GpuJson]
    ignored: list[IgnoredJson]
    exporter: NotRequired[ExporterJson]


class TotalsJson(TypedDict):
    gpus: int
    coreGrantedMilli: int
    memoryMiB: int
    memoryGrantedMiB: int


class ViewJson(TypedDict):
    signaturesChecked: bool
    nodes: list[NodeJson]
    totals: TotalsJson


def view_json(view: ClusterView, usage: Mapping[str, NodeUsage]) -> ViewJson:
    return {
        "signaturesChecked": view.signatures_checked,
        "nodes": [_node_json(node, usage.get(node.name)) for node in view.nodes],
        "totals": {
            "gpus": view.gpus,
            "coreGrantedMilli": view.core_granted_milli,
            "memoryMiB": view.memory_mib,
            "memoryGrantedMiB": view.memory_granted_mib,
        },
    }


def container_usage(gpu: GpuView, share: PodShare, usage: NodeUsage | None) -> ContainerUsage | None:
    """The exporter's reading of one container's share (None: not scraped, or not attributed)."""
    if usage is None:
        return None
    return usage.containers.get((share.namespace, share.pod, share.container, share.mig_uuid or gpu.uuid))


def _node_json(node: NodeView, usage: NodeUsage | None) -> NodeJson:
    out: NodeJson = {
        "name": node.name,
        "address": node.address,
        "ready": node.ready,
        "problem": node.problem,
        "gpus": [_gpu_json(g, usage) for g in node.gpus],
        "ignored": [
            {"namespace": i.namespace, "pod": i.pod, "reason": i.reason, "message": i.message} for i in node.ignored
        ],
    }
    if usage is not None:
        out["exporter"] = {"url": usage.url, "error": usage.error, "runtimeUp": usage.runtime_up}
    return out


def _gpu_json(gpu: GpuView, node_usage: NodeUsage | None) -> GpuJson:
    out: GpuJson = {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "model": gpu.model,
        "healthy": gpu.healthy,
        "migMode": gpu.mig_mode,
        "memoryMiB": gpu.memory_mib,
        "coreGrantedMilli": gpu.core_granted_milli,
        "memoryGrantedMiB": gpu.memory_granted_mib,
        "coreFreeMilli": gpu.core_free_milli,
        "memoryFreeMiB": gpu.memory_free_mib,
        "pods": [_share_json(gpu, s, node_usage) for s in gpu.shares],
        "mig": [{"profile": m.profile, "start": m.start, "uuid": m.uuid, "pod": m.pod} for m in gpu.mig],
    }
    usage = node_usage.gpus.get(gpu.uuid) if node_usage else None
    if usage is not None:
        out["usage"] = {
            "utilization": usage.utilization,
            "memoryUsedBytes": usage.memory_used_bytes,
            "healthy": usage.healthy,
            "reasons": list(usage.reasons),
        }
    return out


def _share_json(gpu: GpuView, share: PodShare, usage: NodeUsage | None) -> ShareJson:
    out: ShareJson = {
        "namespace": share.namespace,
        "pod": share.pod,
        "container": share.container,
        "coreMilli": share.core_milli,
        "memoryMiB": share.memory_mib,
        "migProfile": share.mig_profile,
        "migUUID": share.mig_uuid,
        "claim": share.claim,
    }
    used = container_usage(gpu, share, usage)
    if used is not None:
        out["usage"] = {
            "memoryUsedBytes": used.memory_used_bytes,
            "utilization": used.utilization,
            "overShare": used.over_share,
        }
    return out
