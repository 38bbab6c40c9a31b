"""Small node tables for scheduler tests: nodes described by free CPU and free milli per GPU; and a
GPU node manifest for the live scheduler's tests against the embedded API server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from runtimekit.model import (
    MILLI,
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    NodeCapacity,
    NodeInventory,
    NodeName,
    NodeTable,
    Placement,
    PodKey,
    PodRequest,
    Slot,
)
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo


def table_of(nodes: Sequence[tuple[str, int, Sequence[int]]], cpu_capacity: int = 128_000) -> NodeTable:
    """nodes: (name, free cpu milli, free milli per GPU). Used shares are taken as one placement."""
    table = NodeTable()
    for name, cpu_free, gpus in nodes:
        table.add_node(
            NodeInventory.simulated(name, "T4", len(gpus), 16384), NodeCapacity(cpu_capacity, 10**6 << 20, 110)
        )
        slots = tuple(Slot(i, MILLI - free, 0) for i, free in enumerate(gpus) if free < MILLI)
        table.take(Placement(NodeName(name), cpu_capacity - cpu_free, 0, slots))
    return table


def rows(table: NodeTable, *names: str) -> np.ndarray:
    return np.array([table.row(n) for n in names], np.int64)


def share(milli: int, cpu: int = 1000, count: int = 1) -> PodRequest:
    return PodRequest(cpu, 0, (ContainerGpuRequest("main", GpuRequest(GpuKind.SHARE, count, milli, 0)),))


def whole(count: int, cpu: int = 1000) -> PodRequest:
    return PodRequest(cpu, 0, (ContainerGpuRequest("main", GpuRequest(GpuKind.WHOLE, count)),))


def cpu_only(cpu: int = 1000) -> PodRequest:
    return PodRequest(cpu, 0)


def job_of(
    name: str,
    *requests: PodRequest,
    min_member: int = 1,
    queue: str = "default",
    priority: int = 0,
    created: float = 0.0,
) -> JobInfo:
    job = JobInfo(JobKey(name), "default", name, queue=queue, min_member=min_member, priority=priority, created=created)
    for i, request in enumerate(requests):
        job.add(
            TaskInfo(
                PodKey(f"{name}-{i}"), "default", f"{name}-{i}", job.key, request, priority=priority, created=float(i)
            )
        )
    return job


def meta(name: str, model: str = "T4") -> NodeMeta:
    return NodeMeta(NodeName(name), gpu_model=model)


def static_cache(*names: str, gpus: int = 2) -> StaticCache:
    """Nodes of `gpus` T4s each, 64 CPUs, plenty of memory."""
    return StaticCache(
        [(NodeInventory.simulated(n, "T4", gpus, 16384), NodeCapacity(64000, 10**6 << 20, 110), meta(n)) for n in names]
    )


def gpu_node(name: str, gpus: int, model: str = "H200") -> dict[str, Any]:
    """A Ready node manifest with `gpus` simulated GPUs published as the device plugin does."""
    protocol = KitProtocol.default()
    inventory = NodeInventory.simulated(name, model, gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {protocol.labels.gpu_model: model},
            "annotations": {protocol.annotations.node_devices: inventory.to_annotation()},
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
