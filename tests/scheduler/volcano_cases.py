"""Volcano's scheduler test tables (`pkg/scheduler/actions/*/*_test.go`, `pkg/scheduler/plugins/*/*_test.go`)
as data for the live scheduler: builders named after Volcano's `util.BuildPod`, `BuildPodGroup`,
`BuildPriorityClass`, `BuildQueue` and `BuildNode`, taking the same facts (namespace, name, node,
requests, group, labels), and `run`, which feeds them to a live cache over the fake API server as
informers would and runs sessions of a conf. CPU and memory only, as Volcano's tables are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import TaskInfo
from scheduler.fake_api import FakeApi, P

GROUP = "scheduling.k8s.io/group-name"


def build_node(
    name: str, cpu: str, memory: str, pods: str = "110", labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"node-{name}", "labels": dict(labels or {})},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def build_pod(
    namespace: str,
    name: str,
    node: str,
    cpu: str,
    memory: str,
    group: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    created: int = 0,
    selector: Mapping[str, str] | None = None,
    uid: str = "",
) -> dict[str, Any]:
    """Volcano's `util.BuildPod`: running on `node` ("" pending), requests cpu and memory, in
    PodGroup `group`, with a node selector; `created` seconds after a fixed instant; the UID
    `<namespace>-<name>` as Volcano's builder makes it, unless given."""
    spec: dict[str, Any] = {
        "schedulerName": P.scheduler_name,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if selector:
        spec["nodeSelector"] = dict(selector)
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"{namespace}-{name}",
            "creationTimestamp": f"2026-11-30T00:00:{created:02d}Z",
            "labels": dict(labels or {}),
            "annotations": {GROUP: group, **(annotations or {})},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def build_pod_group(
    name: str,
    namespace: str,
    queue: str,
    min_member: int,
    min_task_member: Mapping[str, int] | None = None,
    phase: str = "Inqueue",
    priority_class: str = "",
    min_resources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Volcano's `util.BuildPodGroup` / `BuildPodGroupWithPrio` / `BuildPodGroupWithMinResources`."""
    spec: dict[str, Any] = {"queue": queue, "minMember": min_member}
    if min_resources:
        spec["minResources"] = dict(min_resources)
    if min_task_member:
        spec["minTaskMember"] = dict(min_task_member)
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase},
    }


def build_priority_class(name: str, value: int, global_default: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def build_queue(
    name: str,
    weight: int = 1,
    capability: Mapping[str, str] | None = None,
    priority: int = 0,
    deserved: Mapping[str, str] | None = None,
    state: str = "",
) -> dict[str, Any]:
    """Volcano's `util.BuildQueue` / `BuildQueueWithPriorityAndResourcesQuantity` / `BuildQueueWithState`."""
    spec: dict[str, Any] = {"weight": weight}
    if capability:
        spec["capability"] = dict(capability)
    if priority:
        spec["priority"] = priority
    if deserved:
        spec["deserved"] = dict(deserved)
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    if state:
        queue["status"] = {"state": state}
    return queue


class RecordingApi(FakeApi):
    """The fake API server, recording the pods evicted (namespace/name) in order."""

    def __init__(self) -> None:
        super().__init__()
        self.evicted: list[str] = []

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evicted.append(f"{task.namespace}/{task.name}")
        super().evict(task, reason)


@dataclass
class Case:
    """One row of a Volcano table: what the cluster holds, and the conf to run on it."""

    name: str
    conf: str
    nodes: Sequence[dict[str, Any]]
    pods: Sequence[dict[str, Any]]
    groups: Sequence[dict[str, Any]] = ()
    queues: Sequence[dict[str, Any]] = ()
    classes: Sequence[dict[str, Any]] = field(default_factory=list)
    claims: Sequence[dict[str, Any]] = ()  # ResourceClaims (resource.k8s.io/v1), made before the pods
    device_classes: Sequence[dict[str, Any]] = ()  # DeviceClasses, made before the claims
    slices: Sequence[dict[str, Any]] = ()  # ResourceSlices, made after the claims


def run(case: Case, sessions: int = 1) -> tuple[RecordingApi, LiveCache]:
    """Feed the case to a live cache (priority classes, queues, groups, nodes, then pods, as
    informers list them) and run `sessions` sessions of its conf; bindings are drained each time."""
    api = RecordingApi()
    live = live_cache(P, P.scheduler_name, api, bind_workers=1, retry_seconds=0.0)
    api.attach(live.cache)
    for pc in case.classes:
        live.cache.on_priority_class("ADDED", pc)
    for queue in case.queues:
        live.cache.on_queue("ADDED", queue)
    for group in case.groups:
        live.cache.on_podgroup("ADDED", group)
    for node in case.nodes:
        api.add_node(node)
    for pod in case.pods:
        api.add_pod(pod)
    framework = Framework(parse_conf(case.conf), builtin_registry(), BuildContext(protocol=P))
    live.include_running = framework.needs_running
    try:
        for _ in range(sessions):
            framework.run_once(live)
            assert live.binder.drain()
    finally:
        live.binder.close()
    return api, live


def bound(api: FakeApi) -> dict[str, str]:
    """namespace/name -> node of the pods bound by the scheduler (Volcano's ExpectBindMap)."""
    return {
        key: pod["spec"]["nodeName"]
        for key, pod in api.pods.items()
        if pod["spec"].get("nodeName") and pod["status"]["phase"] == "Pending"
    }
