"""The kubelet side of the wire: one DevicePlugin gRPC server per resource, and registration with kubelet.

`DevicePluginServicer` only translates v1beta1 messages to `DevicePluginService` calls: a
`ServiceError` becomes its gRPC status with the message kubelet shows on the pod; anything else is
logged and answered INTERNAL, so the plugin never crashes on a request. `ResourceServer` serves one
resource on `<plugin-dir>/<socket>` (serving before it registers, protocols.md §1.5) and knows when
kubelet deleted its socket.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import TypeVar

import grpc

from runtimekit.api import kubelet
from runtimekit.api.runtimekit.v1 import runtime_pb2 as rpb
from runtimekit.api.v1beta1 import deviceplugin_pb2 as dp
from runtimekit.api.v1beta1 import deviceplugin_pb2_grpc as dp_grpc
from runtimekit.base.rpcerrors import Code, ServiceError, grpc_method
from runtimekit.base.unixsockets import check_path
from runtimekit.deviceplugin.resources import AdvertisedDevice, ResourceSpec, socket_name
from runtimekit.deviceplugin.service import DevicePluginService

log = logging.getLogger(__name__)

Msg = TypeVar("Msg")
WATCH_POLL_S = 0.5
OPTIONS = dp.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)


rpc = grpc_method("device plugin", log_refusals=True)  # kubelet only puts the message on the pod


def device_message(device: AdvertisedDevice) -> dp.Device:
    health = kubelet.HEALTHY if device.healthy else kubelet.UNHEALTHY
    if device.numa_node < 0:
        return dp.Device(ID=device.id, health=health)
    return dp.Device(ID=device.id, health=health, topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=device.numa_node)]))


def container_response(answer: rpb.AllocateResponse) -> dp.ContainerAllocateResponse:
    return dp.ContainerAllocateResponse(
        envs=dict(answer.envs),
        mounts=[
            dp.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in answer.mounts
        ],
        devices=[
            dp.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in answer.devices
        ],
        annotations=dict(answer.annotations),
        cdi_devices=[dp.CDIDevice(name=name) for name in answer.cdi_devices],
    )


class DevicePluginServicer(dp_grpc.DevicePluginServicer):
    """The DevicePlugin service of one resource."""

    def __init__(self, service: DevicePluginService, spec: ResourceSpec) -> None:
        self._service = service
        self._spec = spec
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        self._service.state.wake()

    @rpc
    def GetDevicePluginOptions(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        return OPTIONS

    def ListAndWatch(self, request: dp.Empty, context: grpc.ServicerContext) -> Iterator[dp.ListAndWatchResponse]:
        state = self._service.state
        context.add_callback(state.wake)
        generation, devices = state.snapshot()
        last: list[AdvertisedDevice] | None = None
        while True:
            current = self._service.devices(self._spec, devices)
            if current != last:
                last = current
                yield dp.ListAndWatchResponse(devices=[device_message(d) for d in current])
            while True:
                if self._stopped or state.closed or not context.is_active():
                    return
                changed = state.wait_change(generation, WATCH_POLL_S)
                if changed is not None:
                    generation, devices = changed
                    break

    @rpc
    def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        responses = [
            dp.ContainerPreferredAllocationResponse(
                deviceIDs=self._service.preferred(
                    self._spec.name, list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size
                )
            )
            for r in request.container_requests
        ]
        return dp.PreferredAllocationResponse(container_responses=responses)

    @rpc
    def Allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        if not request.container_requests:
            raise ServiceError(Code.INVALID_ARGUMENT, "Allocate without container requests")
        responses = [
            container_response(self._service.allocate(self._spec.name, list(r.devices_ids)))
            for r in request.container_requests
        ]
        return dp.AllocateResponse(container_responses=responses)

    @rpc
    def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> dp.PreStartContainerResponse:
        return dp.PreStartContainerResponse()


class ResourceServer:
    """One resource's DevicePlugin server on its socket in the plugin dir."""

    def __init__(self, service: DevicePluginService, spec: ResourceSpec, plugin_dir: Path) -> None:
        self.spec = spec
        self.socket = plugin_dir / socket_name(spec.name)
        self._service = service
        self._server: grpc.Server | None = None
        self._servicer: DevicePluginServicer | None = None
        self._inode: int | None = None

    def start(self) -> None:
        """(Re)start serving on a fresh socket file. Raises ValueError for a socket path too long to bind."""
        check_path(str(self.socket), f"the socket for {self.spec.name}")
        self.stop()
        self.socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="device-plugin"))
        self._servicer = DevicePluginServicer(self._service, self.spec)
        dp_grpc.add_DevicePluginServicer_to_server(self._servicer, server)
        if server.add_insecure_port(kubelet.unix_target(str(self.socket))) == 0:
            raise OSError(f"cannot listen on {self.socket}")
        server.start()
        self._server = server
        self._inode = os.stat(self.socket).st_ino

    def alive(self) -> bool:
        """Serving, and its socket file is still the one it made (kubelet deletes it on restart)."""
        try:
            return self._server is not None and os.stat(self.socket).st_ino == self._inode
        except FileNotFoundError:
            return False

    def register(self, kubelet_socket: Path, timeout_s: float = 5.0) -> None:
        """Register with kubelet. Raises grpc.RpcError when kubelet refuses or is not there."""
        with grpc.insecure_channel(kubelet.unix_target(str(kubelet_socket))) as channel:
            stub = dp_grpc.RegistrationStub(channel)
            request = dp.RegisterRequest(
                version=kubelet.VERSION, endpoint=self.socket.name, resource_name=self.spec.name, options=OPTIONS
            )
            stub.Register(request, timeout=timeout_s, wait_for_ready=True)
        log.info("registered %s with kubelet (endpoint %s)", self.spec.name, self.socket.name)

    def stop(self, grace_s: float = 0.5) -> None:
        if self._servicer is not None:
            self._servicer.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait()
            if self._inode is not None and self.alive():
                self.socket.unlink(missing_ok=True)
        self._server = None
        self._servicer = None
        self._inode = None
