"""The kubelet side of the wire: the DRAPlugin service (v1 and v1beta1) and plugin registration.

kubelet's plugin watcher finds `<registry>/<driver>-reg.sock`, calls Registration.GetInfo (type
`DRAPlugin`, name = the driver, endpoint = the DRA socket, supported versions `v1.DRAPlugin` and
`v1beta1.DRAPlugin`: kubelet 1.34+ picks v1, 1.32–1.33 v1beta1) and reports the outcome with
NotifyRegistrationStatus; it then calls NodePrepareResources / NodeUnprepareResources on the endpoint,
and watches the devices' health there (`DRAResourceHealth/NodeWatchResources`, `health.py`).
The two DRAPlugin versions have the same messages in different packages, so one translation serves
both. The service is served before the registration socket appears, as kubelet expects.
"""

from __future__ import annotations

import logging
import os
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from runtimekit.api import kubelet, kubelet_dra
from runtimekit.api.dra.v1 import dra_pb2 as v1
from runtimekit.api.dra.v1 import dra_pb2_grpc as v1_grpc
from runtimekit.api.dra.v1beta1 import dra_pb2 as v1beta1
from runtimekit.api.dra.v1beta1 import dra_pb2_grpc as v1beta1_grpc
from runtimekit.api.drahealth.v1alpha1 import health_pb2_grpc as hp_grpc
from runtimekit.api.pluginregistration.v1 import registration_pb2 as reg
from runtimekit.api.pluginregistration.v1 import registration_pb2_grpc as reg_grpc
from runtimekit.base.rpcerrors import grpc_method
from runtimekit.base.unixsockets import check_path
from runtimekit.draplugin.health import HealthServicer, WatchedDevices
from runtimekit.draplugin.service import ClaimRef, DraService

log = logging.getLogger(__name__)
rpc = grpc_method("DRA plugin", log_refusals=True)


def _prepare(service: DraService, request: Any, module: Any) -> Any:
    """NodePrepareResources of either version (`module` is its generated `_pb2`)."""
    refs = [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]
    answers = service.prepare(refs)
    reply = module.NodePrepareResourcesResponse()
    for uid, answer in answers.items():
        entry = reply.claims[uid]
        if answer.error:
            entry.error = answer.error
            continue
        entry.devices.extend(
            module.Device(request_names=[d.request], pool_name=d.pool, device_name=d.device, cdi_device_ids=d.cdi_ids)
            for d in answer.devices
        )
    return reply


def _unprepare(service: DraService, request: Any, module: Any) -> Any:
    refs = [ClaimRef(c.namespace, c.uid, c.name) for c in request.claims]
    reply = module.NodeUnprepareResourcesResponse()
    for uid, error in service.unprepare(refs).items():
        reply.claims[uid].error = error
    return reply


class DraV1Servicer(v1_grpc.DRAPluginServicer):
    def __init__(self, service: DraService) -> None:
        self._service = service

    @rpc
    def NodePrepareResources(
        self, request: v1.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1.NodePrepareResourcesResponse:
        reply: v1.NodePrepareResourcesResponse = _prepare(self._service, request, v1)
        return reply

    @rpc
    def NodeUnprepareResources(
        self, request: v1.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1.NodeUnprepareResourcesResponse:
        reply: v1.NodeUnprepareResourcesResponse = _unprepare(self._service, request, v1)
        return reply


class DraV1beta1Servicer(v1beta1_grpc.DRAPluginServicer):
    def __init__(self, service: DraService) -> None:
        self._service = service

    @rpc
    def NodePrepareResources(
        self, request: v1beta1.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1beta1.NodePrepareResourcesResponse:
        reply: v1beta1.NodePrepareResourcesResponse = _prepare(self._service, request, v1beta1)
        return reply

    @rpc
    def NodeUnprepareResources(
        self, request: v1beta1.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        reply: v1beta1.NodeUnprepareResourcesResponse = _unprepare(self._service, request, v1beta1)
        return reply


class RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: Path) -> None:
        self._info = reg.PluginInfo(
            type=kubelet_dra.PLUGIN_TYPE,
            name=driver,
            endpoint=str(endpoint),
            supported_versions=list(kubelet_dra.SUPPORTED_SERVICES),
        )
        self.status: reg.RegistrationStatus | None = None  # kubelet's last word, for logs and tests

    @rpc
    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return self._info

    @rpc
    def NotifyRegistrationStatus(
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        self.status = request
        if request.plugin_registered:
            log.info("kubelet registered DRA driver %s", self._info.name)
        else:
            log.error("kubelet refused DRA driver %s: %s", self._info.name, request.error)
        return reg.RegistrationStatusResponse()


class _Socket:
    """One gRPC server on a unix socket it made, and whether that socket is still there."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self._name = name
        self._server: grpc.Server | None = None
        self._inode: int | None = None

    def start(self, add: Any) -> None:
        check_path(str(self.path), self._name)
        self.stop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="dra-plugin"))
        add(server)
        if server.add_insecure_port(kubelet.unix_target(str(self.path))) == 0:
            raise OSError(f"cannot listen on {self.path}")
        server.start()
        self._server = server
        self._inode = os.stat(self.path).st_ino

    def alive(self) -> bool:
        try:
            return self._server is not None and os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0.5).wait()
            if self.alive():
                self.path.unlink(missing_ok=True)
        self._server = None
        self._inode = None


class PluginServer:
    """The DRA service on `<plugin-dir>/<driver>/dra.sock`, registration on `<registry>/<driver>-reg.sock`;
    with `devices`, the DRA endpoint serves kubelet's resource health stream too (`health.py`)."""

    def __init__(
        self, service: DraService, plugin_dir: Path, registry_dir: Path, devices: WatchedDevices | None = None
    ) -> None:
        self.endpoint = plugin_dir / service.driver / kubelet_dra.DRA_SOCKET_NAME
        self.registration = RegistrationServicer(service.driver, self.endpoint)
        self._service = service
        self._health = HealthServicer(service.node, devices) if devices is not None else None
        self._dra = _Socket(self.endpoint, "the DRA socket")
        self._reg = _Socket(
            registry_dir / kubelet_dra.registration_socket_name(service.driver), "the registration socket"
        )

    @property
    def registration_socket(self) -> Path:
        return self._reg.path

    def start(self) -> None:
        """Serve DRA, then registration. Raises ValueError for a socket path too long, OSError when it cannot bind."""
        self._dra.start(self._add_dra)
        self._reg.start(lambda server: reg_grpc.add_RegistrationServicer_to_server(self.registration, server))

    def _add_dra(self, server: grpc.Server) -> None:
        v1_grpc.add_DRAPluginServicer_to_server(DraV1Servicer(self._service), server)
        v1beta1_grpc.add_DRAPluginServicer_to_server(DraV1beta1Servicer(self._service), server)
        if self._health is not None:
            hp_grpc.add_DRAResourceHealthServicer_to_server(self._health, server)

    def ensure(self) -> bool:
        """Serve again any socket that was deleted (kubelet's restart may clear the registry); True if one was."""
        restarted = False
        if not self._dra.alive():
            self._dra.start(self._add_dra)
            restarted = True
        if not self._reg.alive():
            self._reg.start(lambda server: reg_grpc.add_RegistrationServicer_to_server(self.registration, server))
            restarted = True
        return restarted

    def stop(self) -> None:
        self._reg.stop()
        self._dra.stop()
