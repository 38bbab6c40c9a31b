"""Run the DRA plugin: mirror the runtime's devices, keep the ResourceSlices, serve and stay registered.

Threads besides the gRPC servers:
- *runtime watch*: WatchDevices → `Devices` (reconnects with backoff); NodePrepareResources reads it;
- *slice publisher*: after every device change (and every `poll_s` until a write succeeds), the
  node's ResourceSlices (`publisher.py`); unhealthy devices drop out of them;
- *supervisor*: every `poll_s`, serves again a socket kubelet deleted (its plugin watcher then
  registers the plugin anew).
`stop()` ends all of it and leaves the slices in place (kubelet deletes a node's slices when it
unregisters the driver, or the Node's deletion does through their owner reference).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from runtimekit.api.runtime_client import DeviceWatch, FeatureUnavailable, RuntimeCallError
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers
from runtimekit.draplugin.publisher import SlicePublisher
from runtimekit.draplugin.server import PluginServer

log = logging.getLogger(__name__)


class Devices:
    """The runtime's devices as last seen, with a generation that moves on every change. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._devices: tuple[pb.Device, ...] = ()
        self.generation = 0

    def update(self, devices: Sequence[pb.Device]) -> None:
        with self._cond:
            new = tuple(devices)
            if new != self._devices or not self.generation:
                self._devices = new
                self.generation += 1
                self._cond.notify_all()

    def current(self) -> Sequence[pb.Device]:
        with self._cond:
            return self._devices

    def wait_past(self, generation: int, timeout_s: float) -> int:
        """The generation once it is past `generation`, or as it is after `timeout_s`."""
        with self._cond:
            self._cond.wait_for(lambda: self.generation > generation, timeout_s)
            return self.generation

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class DraPluginManager:
    def __init__(
        self,
        devices: Devices,
        watch_devices: Callable[[], DeviceWatch],
        server: PluginServer,
        publisher: SlicePublisher | None,
        poll_s: float = 0.5,
    ) -> None:
        self.devices = devices
        self.server = server
        self._open_watch = watch_devices
        self._publisher = publisher
        self._poll_s = poll_s
        self._workers = Workers("DRA plugin")
        self._watch: DeviceWatch | None = None
        self._lock = threading.Lock()

    def start(self, first_devices_timeout_s: float = 30.0) -> DraPluginManager:
        """Mirror the runtime, wait for its first device list, publish, then serve and register."""
        self._workers.spawn("runtime-watch", self._watch_loop)
        if self.devices.wait_past(0, first_devices_timeout_s) == 0:
            self.stop()
            raise TimeoutError(f"no device list from the runtime within {first_devices_timeout_s:g} s")
        if self._publisher is not None:
            self._workers.spawn("slice-publisher", self._publish_loop)
        self.server.start()
        self._workers.every("dra-supervisor", self._poll_s, self._supervise)
        return self

    def stop(self) -> None:
        if self._workers.stopped:
            return
        self._workers.stopping.set()
        with self._lock:
            if self._watch is not None:
                self._watch.cancel()
        self.devices.wake()
        self.server.stop()
        self._workers.stop(5.0)
        log.info("DRA plugin stopped")

    def _watch_loop(self) -> None:
        backoff = Backoff(initial=0.1, maximum=2.0)
        while not self._workers.stopped:
            try:
                watch = self._open_watch()
                with self._lock:
                    if self._workers.stopped:
                        watch.cancel()
                    self._watch = watch
                for reply in watch:
                    backoff.reset()
                    self.devices.update(reply.devices)
            except (RuntimeCallError, FeatureUnavailable) as exc:
                log.warning("runtime watch: %s", exc)
            self._workers.wait(backoff.next())

    def _publish_loop(self) -> None:
        assert self._publisher is not None
        generation, pending = 0, True
        while not self._workers.stopped:
            seen = self.devices.wait_past(generation, self._poll_s)
            if seen != generation:
                generation, pending = seen, True
            if pending and not self._workers.stopped:
                pending = not self._publisher.publish(self.devices.current())

    def _supervise(self) -> None:
        if self.server.ensure():
            log.warning("a plugin socket was deleted (kubelet restarted?): serving it again")
