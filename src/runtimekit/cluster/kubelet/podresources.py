"""kubelet's PodResources API v1 for the simulated kubelet: List, GetAllocatableResources and Get.

Served on its own socket (kubelet's is `/var/lib/kubelet/pod-resources/kubelet.sock`). `List`
reports every pod the kubelet runs with, per container, the device IDs each device plugin resource
gave it, exactly as the plugin advertised them; `GetAllocatableResources` the healthy devices per
resource. The pods kubelet knows come from `running_pods` (the simulated kubelet passes its own
list: its running pods and the one it is admitting, as kubelet's pod manager holds a pod from just
before its admission); by default, the pods holding devices in the DeviceManager and the one it is
admitting. A container's devices appear once its Allocate has returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent import futures
from pathlib import Path

import grpc

from runtimekit.api import kubelet
from runtimekit.api.podresources.v1 import podresources_pb2 as pr
from runtimekit.api.podresources.v1 import podresources_pb2_grpc as pr_grpc
from runtimekit.cluster.kubelet.devicemanager import DeviceManager, PodIdentity

RunningPods = Callable[[], Sequence[tuple[PodIdentity, Sequence[str]]]]  # pod, its container names


class PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    def __init__(self, manager: DeviceManager, running_pods: RunningPods | None = None) -> None:
        self._manager = manager
        self._running = running_pods

    def _pods(self) -> list[pr.PodResources]:
        holding = dict(self._manager.pods())
        if self._running is not None:
            running = list(self._running())
        else:
            running = [(pod, list(containers)) for pod, containers in holding.items()]
            pending = self._manager.pending_admission()
            if pending is not None and pending[0] not in holding:
                running.append((pending[0], list(pending[1])))
        out = []
        for pod, containers in running:
            devices = holding.get(pod, {})
            out.append(
                pr.PodResources(
                    name=pod.name,
                    namespace=pod.namespace,
                    containers=[
                        pr.ContainerResources(
                            name=name,
                            devices=[
                                pr.ContainerDevices(resource_name=resource, device_ids=list(ids))
                                for resource, ids in devices.get(name, [])
                            ],
                        )
                        for name in containers
                    ],
                )
            )
        return out

    def List(self, request: pr.ListPodResourcesRequest, context: grpc.ServicerContext) -> pr.ListPodResourcesResponse:
        return pr.ListPodResourcesResponse(pod_resources=self._pods())

    def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pr.AllocatableResourcesResponse:
        devices = []
        for resource in self._manager.resources():
            ids = sorted(i for i, h in self._manager.devices(resource).items() if h == kubelet.HEALTHY)
            devices.append(pr.ContainerDevices(resource_name=resource, device_ids=ids))
        return pr.AllocatableResourcesResponse(devices=devices)

    def Get(self, request: pr.GetPodResourcesRequest, context: grpc.ServicerContext) -> pr.GetPodResourcesResponse:
        for pod in self._pods():
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return pr.GetPodResourcesResponse(pod_resources=pod)
        context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_namespace}/{request.pod_name} not found")
        raise AssertionError("context.abort returned")  # pragma: no cover


def serve_pod_resources(manager: DeviceManager, socket: Path, running_pods: RunningPods | None = None) -> grpc.Server:
    """Serve PodResources on `socket` (a stale file is removed first); stop the returned server when done."""
    socket.parent.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="pod-resources"))
    pr_grpc.add_PodResourcesListerServicer_to_server(PodResourcesServicer(manager, running_pods), server)
    if server.add_insecure_port(kubelet.unix_target(str(socket))) == 0:
        raise OSError(f"cannot listen on {socket}")
    server.start()
    return server
