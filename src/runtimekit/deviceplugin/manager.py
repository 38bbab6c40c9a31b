"""Run the device plugin: mirror the runtime, serve one socket per resource, register, survive kubelet restarts.

Three threads besides the gRPC servers:
- *runtime watch*: WatchDevices → `DeviceState` (reconnects with backoff; after `runtime_grace_s`
  without the runtime every device is Unhealthy, so kubelet stops admitting pods it cannot serve);
- *publisher*: after every device change, the node's inventory annotation and labels;
- *supervisor*: every `poll_s`, notices kubelet restarts (kubelet.sock re-created, or our sockets
  deleted, protocols.md §1.6), restarts the servers on fresh sockets and registers again; starts a
  server for a resource that appears (a MIG profile); retries registration until kubelet accepts.
`stop()` ends all of it; the daemon calls it on SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from runtimekit.api import kubelet
from runtimekit.api.runtime_client import DeviceWatch, FeatureUnavailable, RuntimeCallError
from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers
from runtimekit.deviceplugin.publisher import NodePublisher
from runtimekit.deviceplugin.server import ResourceServer
from runtimekit.deviceplugin.service import DevicePluginService

log = logging.getLogger(__name__)

WatchOpener = Callable[[], DeviceWatch]


class DevicePluginManager:
    def __init__(
        self,
        service: DevicePluginService,
        watch_devices: WatchOpener,
        plugin_dir: Path,
        publisher: NodePublisher | None = None,
        poll_s: float = 0.2,
        runtime_grace_s: float = 5.0,
    ) -> None:
        self.service = service
        self.plugin_dir = plugin_dir
        self.kubelet_socket = plugin_dir / kubelet.KUBELET_SOCKET_NAME
        self._open_watch = watch_devices
        self._publisher = publisher
        self._poll_s = poll_s
        self._grace_s = runtime_grace_s
        self._workers = Workers("device plugin")
        self._servers: dict[str, ResourceServer] = {}
        self._registered: set[str] = set()
        self._kubelet_inode: int | None = None
        self._watch: DeviceWatch | None = None
        self._watch_lock = threading.Lock()
        self.registrations = 0  # successful Register calls, for tests and logs

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, first_devices_timeout_s: float = 30.0) -> DevicePluginManager:
        """Start mirroring the runtime, wait for its first device list, then serve and register."""
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._workers.spawn("runtime-watch", self._watch_loop)
        if self.service.state.wait_change(0, first_devices_timeout_s) is None:
            self.stop()
            raise TimeoutError(f"no device list from the runtime within {first_devices_timeout_s:g} s")
        if self._publisher is not None:
            self._workers.spawn("node-publisher", self._publish_loop)
        self._sync_servers()
        self._register_all()
        self._workers.spawn("plugin-supervisor", self._supervise_loop)
        return self

    def stop(self) -> None:
        if self._workers.stopped:
            return
        self._workers.stopping.set()
        with self._watch_lock:
            if self._watch is not None:
                self._watch.cancel()
        self.service.state.close()
        for server in self._servers.values():
            server.stop()
        self._workers.stop(5.0)
        log.info("device plugin stopped")

    # -- runtime watch -------------------------------------------------------------------------
    def _watch_loop(self) -> None:
        backoff, lost_since, marked = Backoff(initial=0.1, maximum=2.0), None, False
        while not self._workers.stopped:
            try:
                watch = self._open_watch()
                with self._watch_lock:
                    if self._workers.stopped:
                        watch.cancel()
                    self._watch = watch
                for reply in watch:
                    lost_since, marked = None, False
                    backoff.reset()
                    self.service.state.update(reply.devices)
            except (RuntimeCallError, FeatureUnavailable) as exc:
                log.warning("runtime watch: %s", exc)
            if self._workers.stopped:
                return
            now = time.monotonic()
            lost_since = lost_since or now
            if not marked and now - lost_since >= self._grace_s:
                self.service.state.mark_all_unhealthy("the node runtime is unreachable")
                marked = True
                log.error("the runtime is unreachable: every device is Unhealthy until it is back")
            self._workers.wait(backoff.next())

    # -- node publishing -----------------------------------------------------------------------
    def _publish_loop(self) -> None:
        assert self._publisher is not None
        generation, pending = 0, True
        while not self._workers.stopped:
            changed = self.service.state.wait_change(generation, 2.0)
            if changed is not None:
                generation, pending = changed[0], True
            if pending and not self._workers.stopped:
                pending = not self._publisher.publish(self.service.state.snapshot()[1])

    # -- servers and registration --------------------------------------------------------------
    def _sync_servers(self) -> None:
        """Serve every current resource; (re)start a server whose socket is gone."""
        for spec in self.service.specs():
            server = self._servers.get(spec.name)
            if server is None:
                server = self._servers[spec.name] = ResourceServer(self.service, spec, self.plugin_dir)
            if not server.alive():
                if server.spec.name in self._registered:
                    log.warning("socket %s is gone (kubelet restarted?): serving it again", server.socket)
                server.start()
                self._registered.discard(spec.name)

    def _kubelet_changed(self) -> bool:
        try:
            inode: int | None = os.stat(self.kubelet_socket).st_ino
        except FileNotFoundError:
            inode = None
        changed = inode != self._kubelet_inode
        self._kubelet_inode = inode
        return changed

    def _register_all(self) -> None:
        if self._kubelet_changed():
            self._registered.clear()
            if self._kubelet_inode is not None:
                log.info("kubelet socket %s (re)appeared: registering", self.kubelet_socket)
        if self._kubelet_inode is None:
            return
        for name, server in self._servers.items():
            if name in self._registered or self._workers.stopped:
                continue
            try:
                server.register(self.kubelet_socket)
            except grpc.RpcError as exc:
                log.warning("kubelet refused or did not answer the registration of %s: %s", name, exc)
                continue
            self._registered.add(name)
            self.registrations += 1

    def _supervise_loop(self) -> None:
        while not self._workers.wait(self._poll_s):
            try:
                self._sync_servers()
                self._register_all()
            except Exception:  # keep supervising; the next round retries
                log.exception("device plugin supervisor")
