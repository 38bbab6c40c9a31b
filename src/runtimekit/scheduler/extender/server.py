"""The extender as a server: kube-scheduler's HTTP extender for the kit's GPU plugins
(`runtimekit extender`, docs/user-guide/extender.md). Built by `build_extender` (`scheduler/build.py`).

A replica serves in *terms*. A term begins with fresh informers on Nodes, Pods and Namespaces, which
list the cluster and so rebuild every booking from the pods' assignment annotations (nothing is kept
anywhere but in the API server: a restart loses and double-books nothing); it serves once they have
synced, and ends when the replica stops or loses its Lease, taking its informers and cache with it.

Two replicas never book at once. With leader election (`--leader-elect`) only the holder of the
Lease has a term: a standby answers every verb with an error and `/readyz` with 503, so the
Service sends kube-scheduler's calls to the leader, and a call that reaches a standby books
nothing. A new leader lists the cluster after taking the Lease, so it sees every pod the former
leader bound; the former leader stopped serving at its renew deadline, a few seconds before the
Lease could pass (client-go's timing, `kube/lease.py`), and a bind it had begun by then has long
ended. Without leader election, run one replica.

kube-scheduler writes the pod's Events and its PodScheduled condition for the binds it asks for,
so the extender's binder writes neither.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from runtimekit.base.keyring import KeyRing
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.lease import LeaderElector
from runtimekit.kube.objects import PodGroupStatus, QueueStatus
from runtimekit.kube.scheduling import KubeBinder
from runtimekit.model.authority import Signer
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.binder import Binder
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.endpoints import healthz_route, metrics_route
from runtimekit.scheduler.extender.http import HttpServer, handler, readyz_route
from runtimekit.scheduler.extender.service import Verbs
from runtimekit.scheduler.extender.snapshot import NodeView
from runtimekit.scheduler.framework import Framework
from runtimekit.scheduler.framework.info import TaskInfo

__all__ = ["ExtenderOptions", "ExtenderServer"]

log = logging.getLogger(__name__)
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class ExtenderOptions:
    listen: str = ":8888"  # where the verbs, /healthz, /readyz and /metrics are served
    url_prefix: str = "/lj-runtimekit"  # kube-scheduler's urlPrefix (its path part)
    scheduler_names: tuple[str, ...] = ()  # schedulerName values taken besides the protocol's
    bind_wait: float = 1.0  # how long a bind waits for a pod its informer has not shown yet
    leader_elect: bool = False
    lease_name: str = "lj-runtimekit-extender"
    lease_namespace: str = "kube-system"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    lease_seconds: float = 15.0
    renew_every: float = 2.0
    renew_deadline: float | None = None  # None: two thirds of the lease
    signer: Signer | None = None  # signs assignments; None: unsigned (device plugins refuse them)
    keys: KeyRing | None = None  # checks bound pods' assignments (the same ring); None: their requests only


class _KubeSchedulerReports:
    """The binder's writes for pods kube-scheduler binds through the extender: the binding itself
    (`KubeBinder`) and nothing else. kube-scheduler writes the Events and the PodScheduled condition,
    and preempts (deletes pods) itself."""

    def __init__(self, kube: KubeBinder) -> None:
        self.kube = kube

    def bind(
        self, task: TaskInfo, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        self.kube.bind(task, node, annotations, labels)

    def evict(self, task: TaskInfo, reason: str) -> None:
        return

    def report(self, task: TaskInfo, scheduled: bool, reason: str, message: str) -> None:
        return

    def event(self, task: TaskInfo, kind: str, reason: str, message: str) -> None:
        return

    def update_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        return

    def update_queue(self, name: str, status: QueueStatus) -> None:
        return


class Term:
    """One stretch of serving: a cache listed afresh, its informers and the verbs over it."""

    def __init__(self, server: ExtenderServer) -> None:
        options = server.options
        self.live: LiveCache = live_cache(
            server.protocol, server.names, server.binder, bind_workers=1, signer=options.signer, keys=options.keys
        )
        self.nodes = NodeView(self.live.cache)
        self.verbs = Verbs(server.framework, self.live, self.nodes, server.protocol, server.lock, options.bind_wait)
        cache, http = self.live.cache, server.http
        self.informers: list[Informer[Any]] = [
            Informer(http, "/api/v1/nodes", self.nodes.on_node, name="nodes"),
            Informer(http, "/api/v1/pods", self.live.on_pod, name="pods"),
            Informer(http, "/api/v1/namespaces", cache.on_namespace, name="namespaces", forbidden_ok=True),
        ]
        self.serving = False

    def start(self) -> Term:
        for informer in self.informers:
            informer.start()
        return self

    def synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.informers)

    def stop(self) -> None:
        self.serving = False
        for informer in self.informers:
            informer.stop(timeout=1.0)
        self.live.binder.close()


class ExtenderServer:
    def __init__(
        self,
        http: KubeHttp,
        framework: Framework,
        protocol: KitProtocol,
        options: ExtenderOptions | None = None,
        binder: Binder | None = None,
    ) -> None:
        self.http, self.framework, self.protocol = http, framework, protocol
        self.options = options or ExtenderOptions()
        self.binder: Binder = binder or _KubeSchedulerReports(KubeBinder(http, self.names[0]))
        self.lock = threading.Lock()  # one call at a time uses the plugins, in every term
        self.term: Term | None = None
        self.terms = 0
        self.elector: LeaderElector | None = None
        if self.options.leader_elect:
            o = self.options
            self.elector = LeaderElector(
                http, o.lease_name, o.lease_namespace, o.identity, o.lease_seconds, o.renew_every,
                renew_deadline=o.renew_deadline,
            )  # fmt: skip
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "runtimekit_extender_requests",
            "Extender calls by verb and result",
            ("verb", "result"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "runtimekit_extender_request_duration_seconds",
            "Time to answer an extender call, by verb",
            ("verb",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        serving = Gauge("runtimekit_extender_serving", "1 while this replica serves", registry=self.registry)
        serving.set_function(lambda: 1.0 if self.verbs() is not None else 0.0)
        ProcessCollector(registry=self.registry)
        routes = {
            "/healthz": healthz_route([("ping", lambda: None), ("extender", self._alive)]),
            "/readyz": readyz_route(lambda: None if self.verbs() is not None else self.not_serving()),
            "/metrics": metrics_route(self.registry),
        }
        self.server = HttpServer(self.options.listen, handler(self, self.options.url_prefix, routes))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The schedulerName values whose pods this extender binds: the protocol's name and aliases,
        then the options' (the names of the kube-scheduler profiles that call it)."""
        own = self.protocol.scheduler_name
        extra = [n for n in (*self.protocol.scheduler_aliases, *self.options.scheduler_names) if n != own]
        return (own, *dict.fromkeys(extra))

    @property
    def port(self) -> int:
        return self.server.port

    # -- what the handler asks -------------------------------------------------------------
    def verbs(self) -> Verbs | None:
        term = self.term
        return term.verbs if term is not None and term.serving else None

    def not_serving(self) -> str:
        if self._stop.is_set():
            return "the extender is stopping"
        if self.elector is not None and not self.elector.leading.is_set():
            holder = self.elector.holder
            lease = f"{self.options.lease_namespace}/{self.options.lease_name}"
            return f"this replica is a standby: the Lease {lease} is held by {holder or 'nobody yet'}"
        return "the extender is still listing the cluster"

    def observe(self, verb: str, seconds: float, result: str) -> None:
        self.calls.labels(verb, result).inc()
        self.latency.labels(verb).observe(seconds)

    def _alive(self) -> str | None:
        return None if self._thread is not None and self._thread.is_alive() else "the extender's thread has stopped"

    # -- running ---------------------------------------------------------------------------
    def start(self) -> ExtenderServer:
        log.info("extender for %s starting (protocol fingerprint %s)", ", ".join(self.names), self.protocol.fingerprint)
        if self.options.signer is None:
            log.warning("no assignment key: assignments are bound unsigned and device plugins will refuse them")
        self.server.start()
        log.info("serving %s/{filter,prioritize,bind,preempt} at %s", self.options.url_prefix, self.options.listen)
        if self.elector is not None:
            self.elector.start()
        self._thread = threading.Thread(target=self._run, name="extender terms", daemon=True)
        self._thread.start()
        return self

    def _leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    def _run(self) -> None:
        """Terms one after another: each while this replica may serve (see the module docstring)."""
        while not self._stop.is_set():
            if not self._leading():
                self._stop.wait(0.1)
                continue
            term = self.term = Term(self).start()
            self.terms += 1
            while not self._stop.is_set() and self._leading() and not term.synced(0.2):
                pass
            if not self._stop.is_set() and self._leading():
                cache = term.live.cache
                log.info("serving: %d nodes, %d pods booked", len(cache.nodes), len(cache.ledger.bookings()))
                term.serving = True
            while not self._stop.is_set() and self._leading():
                self._stop.wait(0.1)
            term.stop()
            self.term = None
            if not self._stop.is_set():
                log.warning("stopped serving: this replica no longer holds the Lease")

    def serving(self, timeout: float) -> bool:
        """Wait until this replica serves (tests, readiness)."""
        deadline = time.monotonic() + timeout
        while self.verbs() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.elector is not None:
            self.elector.stop()
            self.elector.release()
        self.server.stop()
