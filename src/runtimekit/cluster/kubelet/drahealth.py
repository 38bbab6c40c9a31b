"""The simulated kubelet's DRA device health (KEP-4680): the plugins' health streams and their cache.

As kubelet's DRA manager does (pkg/kubelet/cm/dra, healthinfo.go): after a driver registers, kubelet
opens `DRAResourceHealth/NodeWatchResources` on its endpoint (`DraHealthWatch.watch`). A plugin that
answers UNIMPLEMENTED has no health reports and is left alone; each answer updates `HealthCache` with
the health of the listed devices and the time the plugin determined it, and the devices whose health
changed go to the listener, which finds the pods holding them. When a stream ends the driver's devices
are forgotten (they read Unknown) and the stream is opened again after a back-off, as long as the
watch runs. A device never reported, or last reported longer ago than `timeout_s`, reads Unknown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from runtimekit.api import kubelet
from runtimekit.api.drahealth.v1alpha1 import health_pb2 as hp
from runtimekit.api.drahealth.v1alpha1 import health_pb2_grpc as hp_grpc
from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers

log = logging.getLogger(__name__)
HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
DEFAULT_TIMEOUT_S = 30.0  # kubelet's DefaultHealthTimeout
DeviceKey = tuple[str, str, str]  # (driver, pool, device)
_NAMES = {hp.HEALTHY: HEALTHY, hp.UNHEALTHY: UNHEALTHY}


class HealthCache:
    """The last health each plugin reported per device, and when. Thread-safe."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] = time.time) -> None:
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._devices: dict[DeviceKey, tuple[str, float]] = {}

    def get(self, driver: str, pool: str, device: str) -> str:
        with self._lock:
            known = self._devices.get((driver, pool, device))
        if known is None or self._clock() - known[1] > self.timeout_s:
            return UNKNOWN
        return known[0]

    def update(self, driver: str, answer: hp.NodeWatchResourcesResponse) -> set[DeviceKey]:
        """Take one answer of a driver's stream; the devices whose health changed."""
        changed: set[DeviceKey] = set()
        now = self._clock()
        with self._lock:
            for entry in answer.devices:
                key = (driver, entry.device.pool_name, entry.device.device_name)
                health = _NAMES.get(entry.health, UNKNOWN)
                updated = float(entry.last_updated_time) or now
                before = self._devices.get(key)
                if before is None or before[0] != health:
                    changed.add(key)
                self._devices[key] = (health, updated)
        return changed

    def clear(self, driver: str) -> set[DeviceKey]:
        """Forget a driver's devices (its stream ended); those that were known."""
        with self._lock:
            gone = {key for key in self._devices if key[0] == driver}
            for key in gone:
                del self._devices[key]
        return gone


class DraHealthWatch:
    """One health stream per registered driver, feeding `cache` and telling `on_change` what changed."""

    def __init__(self, cache: HealthCache, on_change: Callable[[set[DeviceKey]], None]) -> None:
        self.cache = cache
        self._on_change = on_change
        self._workers = Workers("kubelet DRA health")
        self._lock = threading.Lock()
        self._calls: dict[str, Any] = {}  # driver -> its open stream (a grpc.Call), to cancel at stop
        self._watched: dict[str, str] = {}  # driver -> endpoint
        self.unsupported: set[str] = set()  # drivers that answered UNIMPLEMENTED

    def watch(self, driver: str, endpoint: str) -> None:
        """Watch a driver's health (again, at a new endpoint, when it registered anew)."""
        with self._lock:
            if self._watched.get(driver) == endpoint or self._workers.stopped:
                return
            self._watched[driver] = endpoint
            self.unsupported.discard(driver)
        self._workers.spawn(f"DRA health {driver}", lambda: self._run(driver, endpoint))

    def stop(self) -> None:
        self._workers.stopping.set()
        with self._lock:
            calls = list(self._calls.values())
        for call in calls:
            call.cancel()
        self._workers.stop(2.0)

    def _current(self, driver: str, endpoint: str) -> bool:
        with self._lock:
            return self._watched.get(driver) == endpoint and not self._workers.stopped

    def _run(self, driver: str, endpoint: str) -> None:
        backoff = Backoff(initial=0.5, maximum=10.0)
        while self._current(driver, endpoint):
            if not self._stream(driver, endpoint, backoff):
                return
            changed = self.cache.clear(driver)
            if changed:
                self._on_change(changed)
            self._workers.wait(backoff.next())

    def _stream(self, driver: str, endpoint: str, backoff: Backoff) -> bool:
        """Read one stream to its end; False when the plugin has no health service."""
        with grpc.insecure_channel(kubelet.unix_target(endpoint)) as channel:
            call = hp_grpc.DRAResourceHealthStub(channel).NodeWatchResources(hp.NodeWatchResourcesRequest())
            with self._lock:
                self._calls[driver] = call
            try:
                for answer in call:
                    backoff.reset()
                    changed = self.cache.update(driver, answer)
                    if changed:
                        self._on_change(changed)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                if code == grpc.StatusCode.UNIMPLEMENTED:
                    log.info("DRA driver %s has no health service", driver)
                    self.unsupported.add(driver)
                    return False
                if not self._workers.stopped:
                    log.info("health stream of DRA driver %s ended: %s", driver, code or exc)
            finally:
                with self._lock:
                    self._calls.pop(driver, None)
        return True
