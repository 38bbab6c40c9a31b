"""The plugin's side of kubelet's DRA resource health stream (KEP-4680, dra-health v1alpha1).

kubelet opens `DRAResourceHealth/NodeWatchResources` on the DRA endpoint once it has registered the
driver and keeps it open. Each answer lists every device name of the node's pool (`device_health`:
those left out of the ResourceSlices for their health too, so a claim holding a GPU that failed learns
of it) as HEALTHY or UNHEALTHY, with the time it was determined. An answer goes out at once, after
every change of the runtime's devices, and at least every `resend_s` besides: kubelet turns a device
whose last report is older than its health timeout (30 s by default) Unknown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

import grpc

from runtimekit.api.drahealth.v1alpha1 import health_pb2 as hp
from runtimekit.api.drahealth.v1alpha1 import health_pb2_grpc as hp_grpc
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.draplugin.inventory import device_health

log = logging.getLogger(__name__)
RESEND_S = 10.0  # a third of kubelet's default health timeout
_CHECK_S = 0.5  # how often a waiting stream looks whether kubelet (or the server) ended it


class WatchedDevices(Protocol):
    """The runtime's devices as last seen, and a way to wait for the next change (`manager.Devices`)."""

    def current(self) -> Sequence[pb.Device]: ...
    def wait_past(self, generation: int, timeout_s: float) -> int: ...


def health_response(pool: str, devices: Sequence[pb.Device], now: float) -> hp.NodeWatchResourcesResponse:
    return hp.NodeWatchResourcesResponse(
        devices=[
            hp.DeviceHealth(
                device=hp.DeviceIdentifier(pool_name=pool, device_name=name),
                health=hp.HEALTHY if healthy else hp.UNHEALTHY,
                last_updated_time=int(now),
            )
            for name, healthy in sorted(device_health(devices).items())
        ]
    )


class HealthServicer(hp_grpc.DRAResourceHealthServicer):
    """See the module docstring. `pool` is the node's pool (the node name)."""

    def __init__(self, pool: str, devices: WatchedDevices, resend_s: float = RESEND_S) -> None:
        self._pool = pool
        self._devices = devices
        self._resend_s = resend_s

    def NodeWatchResources(
        self, request: hp.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[hp.NodeWatchResourcesResponse]:
        log.info("kubelet watches the health of pool %s", self._pool)
        generation = self._devices.wait_past(-1, 0.0)
        while context.is_active():
            yield health_response(self._pool, self._devices.current(), time.time())
            due = time.monotonic() + self._resend_s
            while context.is_active() and time.monotonic() < due:
                seen = self._devices.wait_past(generation, min(_CHECK_S, max(0.0, due - time.monotonic())))
                if seen != generation:
                    generation = seen
                    break
