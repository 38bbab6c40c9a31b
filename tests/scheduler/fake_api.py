"""A stand-in for the API server behind the live cache: pod and node objects in dicts, binds and
deletions applied to them and echoed back to the cluster cache as watch events would be."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.binder import BindError
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.framework.info import TaskInfo

P = KitProtocol.default()
_uids = itertools.count(1)


def node_object(name: str, gpus: int = 2, model: str = "T4", cpu: str = "32", memory: str = "128Gi") -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, model, gpus, 16384)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {P.labels.gpu_model: model},
            "annotations": {P.annotations.node_devices: inventory.to_annotation()},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_object(
    name: str,
    limits: Mapping[str, Any],
    cpu: str = "1",
    namespace: str = "default",
    scheduler: str = P.scheduler_name,
    annotations: Mapping[str, str] | None = None,
    priority: int = 0,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{next(_uids)}",
            "creationTimestamp": "2026-11-30T00:00:00Z",
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "schedulerName": scheduler,
            "priority": priority,
            "containers": [
                {"name": "main", "resources": {"limits": dict(limits), "requests": {"cpu": cpu, "memory": "1Gi"}}}
            ],
        },
        "status": {"phase": "Pending"},
    }


class FakeApi:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.cache: ClusterCache | None = None
        self.pod_events: Callable[[str, Any], None] | None = None
        self.fail_next_binds = 0
        self.events: list[tuple[str, str, str]] = []
        self.groups: dict[str, Mapping[str, Any]] = {}
        self.queue_status: dict[str, Mapping[str, Any]] = {}
        self.lock = threading.Lock()

    def attach(self, cache: ClusterCache, pods: Callable[[str, Any], None] | None = None) -> None:
        """Echo changes to `cache`; pod events to `pods` when given (`LiveCache.on_pod`, which checks
        assignment signatures first), else to the cache itself."""
        self.cache = cache
        self.pod_events = pods or cache.on_pod

    def add_node(self, obj: dict[str, Any]) -> None:
        self.nodes[obj["metadata"]["name"]] = obj
        if self.cache:
            self.cache.on_node("ADDED", obj)

    def add_pod(self, obj: dict[str, Any]) -> None:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        self.pods[key] = obj
        if self.pod_events:
            self.pod_events("ADDED", obj)

    def delete_pod(self, key: str) -> None:
        obj = self.pods.pop(key)
        if self.pod_events:
            self.pod_events("DELETED", obj)

    def finish_pod(self, key: str) -> None:
        obj = self.pods[key]
        obj["status"]["phase"] = "Succeeded"
        if self.pod_events:
            self.pod_events("MODIFIED", obj)

    # -- Binder ----------------------------------------------------------------------------
    def bind(
        self, task: TaskInfo, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        with self.lock:
            if self.fail_next_binds > 0:
                self.fail_next_binds -= 1
                raise BindError("injected failure")
            obj = self.pods.get(f"{task.namespace}/{task.name}")
            if obj is None or obj["metadata"]["uid"] != task.uid:
                raise BindError("pod not found")
            if obj["spec"].get("nodeName"):
                raise BindError("pod already bound")
            obj["spec"]["nodeName"] = node
            obj["metadata"]["annotations"].update(annotations)
            if labels:
                obj["metadata"].setdefault("labels", {}).update(labels)
        assert self.pod_events is not None
        self.pod_events("MODIFIED", obj)

    def evict(self, task: TaskInfo, reason: str) -> None:
        key = f"{task.namespace}/{task.name}"
        if key in self.pods:
            self.delete_pod(key)

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        self.events.append((task.name, reason, message))

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        self.events.append((task.name, reason, message))

    def update_group(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.groups[f"{namespace}/{name}"] = status

    def update_queue(self, name: str, status: Mapping[str, Any]) -> None:
        self.queue_status[name] = status
