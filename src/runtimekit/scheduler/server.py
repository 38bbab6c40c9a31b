"""The live scheduler: informers on Nodes, Pods, PodGroups and Queues feed the cache; a scheduling
thread runs a session whenever there is work (new pods, or a change that could help a waiting
pod), at most every `period` seconds; binds go to the API server from a pool of binder threads.
With leader election only the holder of the Lease schedules.

Nothing is scheduled before the Node and Pod informers have synced, so a restarted scheduler first
rebuilds every booking from the API objects (ARCHITECTURE §2).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

from runtimekit.kube.events import DEFAULT_BURST, DEFAULT_QPS, EventRecorder
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.lease import LeaderElector
from runtimekit.kube.scheduling import KubeBinder
from runtimekit.protocol import Protocol
from runtimekit.scheduler.cache.live import Binder, LiveCache
from runtimekit.scheduler.cache.queues import ALWAYS, queue_manifest
from runtimekit.scheduler.framework import Framework

log = logging.getLogger(__name__)
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
QUEUE_STATUS_EVERY_S = 1.0  # queue status is written at most this often (when it changed)


@dataclass
class SchedulerOptions:
    period: float = 0.05  # the shortest time between two sessions
    idle_wakeup: float = 5.0  # look for retries at least this often
    retry_seconds: float = 30.0  # retry unschedulable pods this often even if nothing changed
    bind_workers: int = 8
    event_qps: float = DEFAULT_QPS  # Events written per second at most (0: no limit) ...
    event_burst: int = DEFAULT_BURST  # ... with bursts up to this many
    leader_elect: bool = False
    lease_name: str = "lj-runtimekit-scheduler"
    lease_namespace: str = "kube-system"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    lease_seconds: float = 15.0
    renew_every: float = 2.0
    scheduler_names: tuple[str, ...] = ()  # schedulerName values answered besides the protocol's


class Scheduler:
    def __init__(
        self,
        http: KubeHttp,
        framework: Framework,
        protocol: Protocol,
        options: SchedulerOptions | None = None,
        binder: Binder | None = None,
    ) -> None:
        self.http, self.framework, self.protocol = http, framework, protocol
        self.options = options or SchedulerOptions()
        needs_running = bool({"preempt", "reclaim"} & set(framework.action_names))
        self.events: EventRecorder | None = None
        self.kube_binder: KubeBinder | None = None
        if binder is None:
            self.events = EventRecorder(
                http, protocol.scheduler_name, qps=self.options.event_qps, burst=self.options.event_burst
            )
            binder = self.kube_binder = KubeBinder(http, protocol.scheduler_name, self.events)
        self.cache = LiveCache(
            protocol,
            self.names,
            binder,
            retry_seconds=self.options.retry_seconds,
            bind_workers=self.options.bind_workers,
            include_running=needs_running,
        )
        c = self.cache
        self.informers = [
            Informer(http, "/api/v1/nodes", c.on_node, name="nodes"),
            Informer(http, "/api/v1/pods", c.on_pod, name="pods"),
            Informer(http, f"{VOLCANO}/podgroups", c.on_podgroup, name="podgroups", optional=True),
            Informer(http, f"{VOLCANO}/queues", c.on_queue, name="queues", optional=True),
        ]
        self.elector: LeaderElector | None = None
        if self.options.leader_elect:
            self.elector = LeaderElector(
                http,
                self.options.lease_name,
                self.options.lease_namespace,
                self.options.identity,
                self.options.lease_seconds,
                self.options.renew_every,
            )
        self.sessions = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The schedulerName values this scheduler takes pods of: the protocol's, then the options'."""
        extra = [n for n in self.options.scheduler_names if n != self.protocol.scheduler_name]
        return (self.protocol.scheduler_name, *dict.fromkeys(extra))

    def start(self) -> Scheduler:
        log.info("scheduler %s starting (protocol fingerprint %s)", ", ".join(self.names), self.protocol.fingerprint)
        for informer in self.informers:
            informer.start()
        if self.elector is not None:
            self.elector.start()
        self._thread = threading.Thread(target=self._loop, name="scheduling", daemon=True)
        self._thread.start()
        return self

    def synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.synced.wait(left):
                return False
        return True

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    def _loop(self) -> None:
        while not self._stop.is_set() and not self.synced(timeout=0.5):
            pass
        log.info(
            "informers synced: %d nodes, %d pods known",
            len(self.cache.nodes),
            len(self.cache.running) + len(self.cache.pending),
        )
        queues_ensured = False
        last = last_queues = 0.0
        while not self._stop.is_set():
            self.cache.work.wait(self.options.idle_wakeup)
            self.cache.work.clear()
            if self._stop.is_set():
                break
            if not self.leading:
                continue
            if not queues_ensured:
                self._ensure_queues()
                queues_ensured = True
            wait = self.options.period - (time.monotonic() - last)
            if wait > 0:
                self._stop.wait(wait)
            now = time.monotonic()
            if now - last_queues >= QUEUE_STATUS_EVERY_S:
                last_queues = now
                self.cache.sync_queues()
            if not self.cache.has_work():
                continue
            last = time.monotonic()
            try:
                self.framework.run_once(self.cache)
                self.sessions += 1
            except Exception:
                log.exception("scheduling session failed")
            if self.cache.has_work():
                self.cache.work.set()

    def _ensure_queues(self) -> None:
        """Create the queues Volcano always has (`default`, `root`) where Queues are served."""
        if self.kube_binder is None:
            return
        for name in ALWAYS:
            if name in self.cache.queues:
                continue
            try:
                if not self.kube_binder.ensure_queue(queue_manifest(name)):
                    return  # no Queue kind on this server: the scheduler uses its own default
                log.info("created Queue %s (Volcano always has it)", name)
            except Exception as exc:
                log.warning("could not create Queue %s: %s", name, exc)

    def stop(self) -> None:
        self._stop.set()
        self.cache.work.set()
        if self._thread is not None:
            self._thread.join(10)
        for informer in self.informers:
            informer.stop(timeout=1.0)
        self.cache.close()
        if self.events is not None:
            self.events.close()
        if self.elector is not None:
            self.elector.stop()
            self.elector.release()
