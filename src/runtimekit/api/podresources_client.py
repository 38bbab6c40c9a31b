"""A client of kubelet's PodResources API v1 `List` (protocols.md §2): which pods kubelet knows, and per
container the device IDs each device plugin resource gave it.

kubelet adds a pod to its pod manager before it admits it, and records a container's devices of
a resource only once that resource's Allocate has returned, so during an Allocate the pod being
admitted is listed without devices of that resource (the device plugin relies on this to know
which pod an Allocate is for). Up to 1.33 `List` shows every pod of the pod manager, terminated
ones included; from 1.34 only active ones (feature gate `KubeletPodResourcesListUseActivePods`).
Callers: the device plugin (at Allocate) and the node runtime (reconciliation).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from runtimekit.api.kubelet import unix_target
from runtimekit.api.podresources.v1 import podresources_pb2 as pr
from runtimekit.api.podresources.v1 import podresources_pb2_grpc as pr_grpc


@dataclass(frozen=True)
class ListedContainer:
    name: str
    devices: Mapping[str, tuple[str, ...]]  # resource -> device IDs kubelet gave the container


@dataclass(frozen=True)
class ListedPod:
    namespace: str
    name: str
    containers: tuple[ListedContainer, ...]

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def container(self, name: str) -> ListedContainer | None:
        return next((c for c in self.containers if c.name == name), None)


def listed_pods(reply: pr.ListPodResourcesResponse) -> list[ListedPod]:
    out = []
    for pod in reply.pod_resources:
        containers = []
        for container in pod.containers:
            devices: dict[str, tuple[str, ...]] = {}
            for held in container.devices:
                devices[held.resource_name] = devices.get(held.resource_name, ()) + tuple(held.device_ids)
            containers.append(ListedContainer(container.name, devices))
        out.append(ListedPod(pod.namespace, pod.name, tuple(containers)))
    return out


class PodResourcesClient:
    """`List` over one channel kept open. Thread-safe; raises grpc.RpcError when kubelet does not answer."""

    def __init__(self, socket_path: str, timeout_s: float = 5.0) -> None:
        self.socket_path = socket_path
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: pr_grpc.PodResourcesListerStub | None = None

    def list(self) -> list[ListedPod]:
        with self._lock:
            if self._stub is None:
                self._channel = grpc.insecure_channel(unix_target(self.socket_path))
                self._stub = pr_grpc.PodResourcesListerStub(self._channel)
            stub = self._stub
        reply: pr.ListPodResourcesResponse = stub.List(pr.ListPodResourcesRequest(), timeout=self._timeout)
        return listed_pods(reply)

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self._channel, self._stub = None, None
