"""Helpers for the device plugin tests: an in-memory NodeApi and pod builders."""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.base.keyring import KeyRing
from runtimekit.cluster.kubelet.devicemanager import DeviceManager
from runtimekit.deviceplugin.manager import DevicePluginManager
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.service import DevicePluginService
from runtimekit.kube.errors import ConflictError, NotFoundError, UnavailableError
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName
from runtimekit.model.authority import sign_assignment
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.service import NodeRuntime

PROTOCOL = KitProtocol.default()
RES = PROTOCOL.resources
NODE = "node-a"
KEYS = KeyRing.from_secrets(b"the scheduler's key, for the device plugin tests")  # what the Secret holds


def signed(uid: str, assignment: Assignment, keys: KeyRing = KEYS) -> dict[str, str]:
    """The assignment annotation and the scheduler's signature of it, as a bind writes them."""
    text = assignment.to_annotation()
    return {
        PROTOCOL.annotations.assignment: text,
        PROTOCOL.annotations.assignment_signature: sign_assignment(keys, uid, text),
    }


class FakeNodeApi:
    """Pods and nodes in memory, with resourceVersions and the preconditions the API server checks."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.node_labels: dict[str, dict[str, str]] = {}
        self.node_annotations: dict[str, dict[str, str]] = {}
        self.node_patches = 0
        self.down = False
        self.changes_before_patch = 0  # someone else edits the pod this many times, just before our patch
        self._rv = itertools.count(100)
        self._lock = threading.Condition()

    def wait_node(self, predicate: Callable[[FakeNodeApi], bool], timeout_s: float = 30.0) -> bool:
        """Wait until `predicate(self)` holds, checked after every node patch."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout_s)

    def add(self, pod: dict[str, Any]) -> dict[str, Any]:
        pod = copy.deepcopy(pod)
        pod["metadata"]["resourceVersion"] = str(next(self._rv))
        self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod
        return pod

    def annotations(self, namespace: str, name: str) -> dict[str, str]:
        return dict(self.pods[(namespace, name)]["metadata"].get("annotations") or {})

    def list_node_pods(self, node: str) -> list[dict[str, Any]]:
        if self.down:
            raise UnavailableError("API server down")
        with self._lock:
            return [copy.deepcopy(p) for p in self.pods.values() if p["spec"].get("nodeName") == node]

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self._lock:
            if (namespace, name) not in self.pods:
                raise NotFoundError(f"pod {namespace}/{name}")
            return copy.deepcopy(self.pods[(namespace, name)])

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> dict[str, Any]:
        if self.down:
            raise UnavailableError("API server down")
        with self._lock:
            if (namespace, name) not in self.pods:
                raise NotFoundError(f"pod {namespace}/{name}")
            pod = self.pods[(namespace, name)]
            if self.changes_before_patch:
                self.changes_before_patch -= 1
                pod["metadata"]["resourceVersion"] = str(next(self._rv))
            if resource_version and resource_version != pod["metadata"]["resourceVersion"]:
                raise ConflictError(f"pod {namespace}/{name} changed")
            notes = pod["metadata"].setdefault("annotations", {})
            for key, value in annotations.items():
                if value is None:
                    notes.pop(key, None)
                else:
                    notes[key] = value
            pod["metadata"]["resourceVersion"] = str(next(self._rv))
            return copy.deepcopy(pod)

    def patch_node_metadata(
        self, node: str, labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> None:
        if self.down:
            raise UnavailableError("API server down")
        with self._lock:
            self.node_patches += 1
            for target, values in ((self.node_labels, labels), (self.node_annotations, annotations)):
                current = target.setdefault(node, {})
                for key, value in values.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = value
            self._lock.notify_all()


def gpu_pod(
    name: str,
    containers: Sequence[tuple[str, Mapping[str, int], Sequence[tuple[str, int, int, int]]]],
    assume: float | None = 1.0,
    node: str = NODE,
    uid: str | None = None,
    namespace: str = "default",
    phase: str = "Pending",
    assigned: bool = True,
) -> dict[str, Any]:
    """A pod bound to `node` whose containers ask for resources (name -> count) and were assigned
    shares [(gpu uuid, index, core milli, memory MiB)], signed as the scheduler signs them."""
    annotations: dict[str, str] = {}
    uid = uid or f"uid-{name}"
    if assigned:
        assignment = Assignment(
            NodeName(node),
            {c: tuple(GpuShare(GpuUUID(u), i, core, mem) for u, i, core, mem in shares) for c, _, shares in containers},
        )
        annotations.update(signed(uid, assignment))
    if assume is not None:
        annotations[PROTOCOL.annotations.assume_time] = str(int((1_700_000_000 + assume) * 1e9))  # ns
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "schedulerName": PROTOCOL.scheduler_name,
            "containers": [
                {"name": c, "image": "x", "resources": {"limits": {k: str(v) for k, v in limits.items()}}}
                for c, limits, _ in containers
            ],
        },
        "status": {"phase": phase},
    }


def mig_pod(
    name: str,
    profile: str,
    slots: Sequence[tuple[str, int, int, str]],
    assume: float = 1.0,
    count: int | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A pod bound to NODE whose one container asks `count` (default: one per slot) slices of a MIG profile
    and was assigned slots [(GPU uuid, GPU index, start, MIG uuid or "" for dynamic)], as the scheduler writes them."""
    shares = tuple(
        GpuShare(GpuUUID(mig), index, 0, 0, profile, GpuUUID(gpu), start) for gpu, index, start, mig in slots
    )
    uid = uid or f"uid-{name}"
    annotations = {
        **signed(uid, Assignment(NodeName(NODE), {"main": shares})),
        PROTOCOL.annotations.assume_time: str(int((1_700_000_000 + assume) * 1e9)),
    }
    limits = {RES.mig_prefix + profile: str(len(slots) if count is None else count)}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid, "annotations": annotations},
        "spec": {
            "nodeName": NODE,
            "schedulerName": PROTOCOL.scheduler_name,
            "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Pending"},
    }


@dataclass
class Stack:
    dir: Path
    daemon: RuntimeDaemon
    client: RuntimeClient
    kube: FakeNodeApi
    service: DevicePluginService
    gpus: list[str]
    manager: DevicePluginManager | None = None
    kubelet: DeviceManager | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def runtime(self) -> NodeRuntime:
        return self.daemon.runtime

    def start_plugin(self, poll_s: float = 0.05, runtime_grace_s: float = 5.0) -> DevicePluginManager:
        """Start the simulated kubelet first (kubelet.sock), then the plugin manager."""
        self.kubelet = DeviceManager(self.dir / "plugins").start()
        publisher = NodePublisher(self.kube, NODE, PROTOCOL, self.service.settings.memory_unit_mib)
        self.manager = DevicePluginManager(
            self.service, self.client.watch_devices, self.dir / "plugins", publisher, poll_s, runtime_grace_s
        ).start(first_devices_timeout_s=5.0)
        self.closers += [self.manager.stop, self.kubelet.stop]
        return self.manager


StackFactory = Callable[..., Stack]
