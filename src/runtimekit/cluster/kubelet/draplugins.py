"""The simulated kubelet's DRA side: the plugin watcher's registration of DRA drivers, and the calls
kubelet makes to a registered driver.

As kubelet does (pkg/kubelet/pluginmanager and cm/dra): `DraPluginWatcher.scan` finds sockets in the
plugin registry folder, calls Registration.GetInfo on each new one, accepts a plugin of type
`DRAPlugin` that lists a DRAPlugin service this kubelet speaks (the first of `services` the plugin
lists: a 1.34 kubelet prefers `v1.DRAPlugin`, a 1.32–1.33 kubelet only knows `v1beta1.DRAPlugin`),
and reports the outcome with NotifyRegistrationStatus. `DraPluginClient` calls
NodePrepareResources / NodeUnprepareResources on the plugin's endpoint with the service it chose;
`cdi_ids_for` is kubelet's `cdiDevicesAsList`: the CDI devices a container gets for a claim, or for
one request of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import grpc

from runtimekit.api import kubelet, kubelet_dra
from runtimekit.api.dra.v1 import dra_pb2 as v1
from runtimekit.api.dra.v1 import dra_pb2_grpc as v1_grpc
from runtimekit.api.dra.v1beta1 import dra_pb2 as v1beta1
from runtimekit.api.dra.v1beta1 import dra_pb2_grpc as v1beta1_grpc
from runtimekit.api.pluginregistration.v1 import registration_pb2 as reg
from runtimekit.api.pluginregistration.v1 import registration_pb2_grpc as reg_grpc

log = logging.getLogger(__name__)
TIMEOUT_S = 45.0  # kubelet's default for a DRA call (pluginClientTimeout)


@dataclass(frozen=True)
class ClaimKey:
    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class ClaimResult:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


def cdi_ids_for(result: ClaimResult, request: str = "") -> list[str]:
    """The CDI devices of a claim for a container that names the claim (`request` "") or one request."""
    return [
        cdi
        for device in result.devices
        if not request or not device.request_names or request in device.request_names
        for cdi in device.cdi_ids
    ]


class _Device(Protocol):
    @property
    def request_names(self) -> Sequence[str]: ...
    @property
    def pool_name(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def cdi_device_ids(self) -> Sequence[str]: ...


class _Answer(Protocol):
    @property
    def devices(self) -> Sequence[_Device]: ...
    @property
    def error(self) -> str: ...


def _results(answers: Mapping[str, _Answer]) -> dict[str, ClaimResult]:
    """NodePrepareResources' answers of either version."""
    return {
        uid: ClaimResult(
            tuple(
                PreparedDevice(tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids))
                for d in answer.devices
            ),
            answer.error,
        )
        for uid, answer in answers.items()
    }


class DraPluginClient:
    """A registered driver, called with the DRAPlugin service version kubelet chose."""

    def __init__(self, driver: str, endpoint: str, service: str) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.service = service
        self._channel = grpc.insecure_channel(kubelet.unix_target(endpoint))
        self._v1 = v1_grpc.DRAPluginStub(self._channel)
        self._v1beta1 = v1beta1_grpc.DRAPluginStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def prepare(self, claims: Sequence[ClaimKey]) -> dict[str, ClaimResult]:
        if self.service == kubelet_dra.V1_SERVICE:
            request1 = v1.NodePrepareResourcesRequest(
                claims=[v1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
            )
            return _results(self._v1.NodePrepareResources(request1, timeout=TIMEOUT_S).claims)
        request2 = v1beta1.NodePrepareResourcesRequest(
            claims=[v1beta1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        return _results(self._v1beta1.NodePrepareResources(request2, timeout=TIMEOUT_S).claims)

    def unprepare(self, claims: Sequence[ClaimKey]) -> dict[str, str]:
        if self.service == kubelet_dra.V1_SERVICE:
            reply1 = self._v1.NodeUnprepareResources(
                v1.NodeUnprepareResourcesRequest(
                    claims=[v1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
                ),
                timeout=TIMEOUT_S,
            )
            return {uid: answer.error for uid, answer in reply1.claims.items()}
        reply2 = self._v1beta1.NodeUnprepareResources(
            v1beta1.NodeUnprepareResourcesRequest(
                claims=[v1beta1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
            ),
            timeout=TIMEOUT_S,
        )
        return {uid: answer.error for uid, answer in reply2.claims.items()}


@dataclass
class DraPluginWatcher:
    """kubelet's plugin watcher for DRA drivers over one registry folder."""

    registry: Path
    services: tuple[str, ...] = kubelet_dra.SUPPORTED_SERVICES  # what this kubelet speaks, preferred first
    plugins: dict[str, DraPluginClient] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # socket -> why

    def scan(self) -> list[str]:
        """Register the plugins of new sockets; the drivers registered by this scan."""
        known = {p.endpoint for p in self.plugins.values()}
        added = []
        for socket in sorted(self.registry.glob("*.sock")):
            if str(socket) in self.refused or any(socket.name == Path(e).name for e in known):
                continue
            driver = self._register(socket)
            if driver:
                added.append(driver)
        return added

    def _register(self, socket: Path) -> str:
        with grpc.insecure_channel(kubelet.unix_target(str(socket))) as channel:
            stub = reg_grpc.RegistrationStub(channel)
            info: reg.PluginInfo = stub.GetInfo(reg.InfoRequest(), timeout=5.0)
            error = ""
            chosen = next((s for s in self.services if s in info.supported_versions), "")
            if info.type != kubelet_dra.PLUGIN_TYPE:
                error = f"plugin type {info.type!r} is not handled by this watcher"
            elif not chosen:
                error = (
                    f"none of the versions supported by the plugin ({', '.join(info.supported_versions)}) "
                    f"are supported by kubelet ({', '.join(self.services)})"
                )
            stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=not error, error=error), timeout=5.0)
        if error:
            self.refused[str(socket)] = error
            return ""
        old = self.plugins.pop(info.name, None)
        if old is not None:
            old.close()
        self.plugins[info.name] = DraPluginClient(info.name, info.endpoint, chosen)
        log.info("registered DRA driver %s at %s (%s)", info.name, info.endpoint, chosen)
        return info.name

    def close(self) -> None:
        for plugin in self.plugins.values():
            plugin.close()
        self.plugins.clear()
