"""The live scheduler: informers on Nodes, Pods, Namespaces (their labels, for inter-pod affinity's
namespaceSelector), PodGroups and Queues (and PodDisruptionBudgets, ResourceQuotas or the storage
objects when a configured plugin reads them) feed the cluster cache (`cache/cluster.py`), which hands the pending
pods of this scheduler to the scheduling queue (`scheduling_queue.py`); a scheduling thread runs a
session whenever the queue has an active pod, at most every `period` seconds; the binder
(`binder.py`) binds on its threads through the API server. `cache/live.py` wires the three and
answers the sessions. With leader election only the holder of the Lease schedules; a scheduler
that becomes leader runs its first session at once (the informers' lists have already woken one
whose caches have just synced: every list has at least the `default` Namespace).

Nothing is scheduled before the Node and Pod informers have synced, so a restarted scheduler first
rebuilds every booking from the API objects (ARCHITECTURE §2).

Around that: Volcano's metrics (`metrics/`), `/healthz` and `/metrics` (`endpoints.py`), and conf
reload (`reload.py`): a new framework built from a changed conf takes over between two sessions,
keeping the cache; a conf with errors, one that cannot be read, or one that drops the GPU plugins
while pods ask for GPUs (`conf_guard.py`) is refused: the running conf stays, the refusal is counted
(`runtimekit_scheduler_conf_reloads_total{result="refused"}`) and leaves a Warning Event on the
scheduler's Pod (`POD_NAME` and `POD_NAMESPACE` from the downward API), else on its Lease, else only
the log says so.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector

from runtimekit.base.keyring import KeyRing
from runtimekit.kube import jsoncodec
from runtimekit.kube.events import DEFAULT_BURST, DEFAULT_QPS, EventRecorder, event_body, post_event
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Handler, Informer, strip_managed_fields
from runtimekit.kube.lease import LeaderElector
from runtimekit.kube.objects import Pod, meta
from runtimekit.kube.scheduling import KubeBinder
from runtimekit.model.authority import Signer
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.binder import Binder
from runtimekit.scheduler.cache.dra import CLAIMS, LiveClaims
from runtimekit.scheduler.cache.dra import PATHS as DRA_PATHS
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.cache.objects import timestamp
from runtimekit.scheduler.cache.queues import ROOT_QUEUE, queue_manifest
from runtimekit.scheduler.cache.volumes import PATHS as VOLUME_PATHS
from runtimekit.scheduler.cache.volumes import LiveVolumes
from runtimekit.scheduler.conf_guard import gpu_plugins_lost
from runtimekit.scheduler.endpoints import Endpoint, Route, Tls, healthz_route, metrics_route
from runtimekit.scheduler.framework import Framework
from runtimekit.scheduler.framework.check import Checked, check_conf
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.sampling import NodeSampler, NodeSampling
from runtimekit.scheduler.metrics.assignments import IgnoredAssignments
from runtimekit.scheduler.metrics.observer import WATCHED, ObservedBinder, ObservedCache, SchedulerMetrics
from runtimekit.scheduler.metrics.series import ValueVec
from runtimekit.scheduler.metrics.state import ClusterState
from runtimekit.scheduler.reload import ConfWatcher

__all__ = ["NodeSampling", "Scheduler", "SchedulerOptions"]

log = logging.getLogger(__name__)
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
QUEUE_STATUS_EVERY_S = 1.0  # queue status is written at most this often (when it changed)
LEASE_TOLERANCE_S = 20.0  # kube-scheduler's: a leader this late renewing its Lease is unhealthy


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
    renew_deadline: float | None = None  # None: two thirds of the lease
    scheduler_names: tuple[str, ...] = ()  # schedulerName values answered besides the protocol's
    default_queue: str = "default"
    node_sampling: NodeSampling | None = None  # None: score every feasible node
    conf_path: str | None = None  # watched for changes when set
    conf_poll: float = 1.0
    healthz_address: str | None = None  # serve /healthz there
    metrics_address: str | None = None  # serve /metrics there
    tls: tuple[str | None, str | None, str | None] = (None, None, None)  # CA, certificate, key for /healthz
    signer: Signer | None = None  # signs assignments (the Secret's key ring); None: unsigned, refused by plugins
    allow_conf_without_gpu_plugin: bool = False  # apply a reloaded conf that drops GPU plugins pods need
    keys: KeyRing | None = None  # checks bound pods' assignments (the same ring); None: their requests only


class Scheduler:
    def __init__(
        self,
        http: KubeHttp,
        framework: Framework,
        protocol: KitProtocol,
        options: SchedulerOptions | None = None,
        binder: Binder | None = None,
    ) -> None:
        self.http, self.framework, self.protocol = http, framework, protocol
        self.options = options or SchedulerOptions()
        self.metrics = SchedulerMetrics()
        self.events: EventRecorder | None = None
        self.kube_binder: KubeBinder | None = None
        if binder is None:
            self.events = EventRecorder(
                http, self.component, qps=self.options.event_qps, burst=self.options.event_burst
            )
            binder = self.kube_binder = KubeBinder(http, self.component, self.events)
        # the scheduling queue, the cluster cache and the binder, and the sessions' cache over them
        self.live = live_cache(
            protocol,
            self.names,
            ObservedBinder(binder, self.metrics),
            retry_seconds=self.options.retry_seconds,
            bind_workers=self.options.bind_workers,
            signer=self.options.signer,
            keys=self.options.keys,
        )
        self.queue, self.cache, self.binder = self.live.queue, self.live.cache, self.live.binder
        # PreBind plugins bind volumes through the API server (kube-scheduler's volume binder)
        writer = self.kube_binder or KubeBinder(http, self.component)
        self.binder.volumes = LiveVolumes(self.cache.volumes, self.cache, writer)
        self.binder.claims = LiveClaims(self.cache.dra, http, self.cache.on_dra(CLAIMS))
        self.cache.default_queue = self.options.default_queue
        self.metrics.jobs = lambda: set(self.cache.jobs)
        self._observed = ObservedCache(self.live, self.metrics)
        self.sampler = NodeSampler(self.options.node_sampling) if self.options.node_sampling else None
        c, lean = self.cache, jsoncodec.loads_event_lean
        # each informer hands its handler the kind its path serves (`Informer[Node]`, ...)
        self.informers: list[Informer[Any]] = [
            Informer(http, "/api/v1/nodes", c.on_node, name="nodes", transform=strip_managed_fields, decode=lean),
            Informer(http, "/api/v1/pods", self._on_pod, name="pods", transform=strip_managed_fields, decode=lean),
            # a ClusterRole from before namespaces were read must not stop scheduling
            Informer(http, "/api/v1/namespaces", c.on_namespace, name="namespaces", forbidden_ok=True),
            Informer(http, f"{VOLCANO}/podgroups", c.on_podgroup, name="podgroups", optional=True),
            Informer(http, f"{VOLCANO}/queues", c.on_queue, name="queues", optional=True),
            # a PodGroup's priorityClassName; a ClusterRole from before they were read must not stop scheduling
            Informer(http, PRIORITY_CLASSES, c.on_priority_class, name="priorityclasses", forbidden_ok=True),
        ]
        self._thread: threading.Thread | None = None
        self._use(framework)
        self._next: Framework | None = None  # a reloaded framework, taken up between sessions
        self.elector: LeaderElector | None = None
        if self.options.leader_elect:
            self.elector = LeaderElector(
                http,
                self.options.lease_name,
                self.options.lease_namespace,
                self.options.identity,
                self.options.lease_seconds,
                self.options.renew_every,
                renew_deadline=self.options.renew_deadline,
                on_lead=self.queue.work.set,  # a new leader's first session runs now, not at the next idle wake-up
            )
        self.registry = CollectorRegistry()
        self.registry.register(self.metrics)
        self.registry.register(ClusterState(self.cache, protocol, lambda: self.framework.queue_figures, self))
        self.registry.register(IgnoredAssignments(self.cache))
        self.conf_reloads = ValueVec(
            "runtimekit_scheduler_conf_reloads_total",
            "Conf file changes acted on, by result (applied, refused)",
            ("result",),
            "counter",
        )
        self.conf_ok = ValueVec(
            "runtimekit_scheduler_conf_last_reload_successful",
            "1 when the latest conf file change was applied (or none was seen)",
        )
        self.conf_ok.set(1)
        self.registry.register(self.conf_reloads)
        self.registry.register(self.conf_ok)
        ProcessCollector(registry=self.registry)
        self.watcher: ConfWatcher | None = None
        self.endpoints: list[Endpoint] = []
        self.sessions = 0
        self._stop = threading.Event()

    @property
    def names(self) -> tuple[str, ...]:
        """The schedulerName values this scheduler takes pods of: the protocol's name and its
        `schedulerAliases` (a preset's: `hami-scheduler`, `volcano`), then the options'."""
        own = self.protocol.scheduler_name
        extra = [n for n in (*self.protocol.scheduler_aliases, *self.options.scheduler_names) if n != own]
        return (self.protocol.scheduler_name, *dict.fromkeys(extra))

    @property
    def component(self) -> str:
        """The name Events are written under: the protocol's scheduler name."""
        return self.names[0]

    def _use(self, framework: Framework) -> None:
        self._watch(framework)
        framework.observer = self.metrics
        framework.sampler = self.sampler
        # actions that look at running pods (preempt, reclaim, print, ...) say so (`NeedsRunning`)
        self.live.include_running = framework.needs_running
        self.live.include_claim_users = framework.needs_claim_users
        self.framework = framework

    def _watch(self, framework: Framework) -> None:
        """Informers for what the framework's plugins read besides nodes, pods and Volcano's kinds (a
        plugin says so with `Watches`); added once, started at once when running."""
        paths: dict[str, tuple[str, Handler[Any], str]] = {
            "poddisruptionbudgets": ("/apis/policy/v1/poddisruptionbudgets", self.cache.on_budget, "pdbs"),
            "resourcequotas": ("/api/v1/resourcequotas", self.cache.on_quota, "resourcequotas"),
        }
        watched = framework.watched
        present = {informer.name for informer in self.informers}
        for kind, path in VOLUME_PATHS.items():
            paths[kind] = (path, self.cache.on_volumes(kind), kind)
        for kind, path in DRA_PATHS.items():
            paths[kind] = (path, self.cache.on_dra(kind), kind)
        for kind in sorted(watched & set(paths)):
            path, handler, name = paths[kind]
            if name not in present:
                # a ClusterRole from before the storage kinds were read must not stop scheduling
                informer = Informer(
                    self.http,
                    path,
                    handler,
                    name=name,
                    optional=True,
                    forbidden_ok=kind in VOLUME_PATHS or kind in DRA_PATHS,
                )
                self.informers.append(informer)
                if self._thread is not None:  # a reloaded conf asks for it: watch from now on
                    informer.start()

    def _on_pod(self, kind: str, obj: Pod) -> None:
        """Pods to the cache; a new pending pod of ours is Volcano's `Watched` stage."""
        self.live.on_pod(kind, obj)
        spec = obj.get("spec") or {}
        if kind == "ADDED" and not spec.get("nodeName") and spec.get("schedulerName") in self.cache.scheduler_names:
            created = timestamp(meta(obj).get("creationTimestamp"))
            if created > 0:
                self.metrics.task.observe(max(0.0, time.time() - created) * 1000, WATCHED)

    # -- conf reload -----------------------------------------------------------------------
    def watch_conf(self, registry: Registry, context: BuildContext) -> None:
        """Watch `options.conf_path` (when set) and rebuild the framework from it when it changes."""
        if self.options.conf_path is None:
            return
        self.watcher = ConfWatcher(
            self.options.conf_path,
            lambda text, source: self._check_reload(check_conf(text, source, registry, context)),
            self._reloaded,
            self._refused,
            self.options.conf_poll,
        )

    def _check_reload(self, checked: Checked) -> Checked:
        """`checked`, or its refusal when it would leave pods that ask for GPUs with no plugin to place them."""
        new = checked.framework
        if new is None or self.options.allow_conf_without_gpu_plugin:
            return checked
        running = self._next or self.framework
        why = gpu_plugins_lost(running.plugins, new.plugins, self._known_tasks, self.protocol, checked.source)
        if why is None:
            return checked
        checked.problems.error(why)
        return Checked(checked.source, checked.problems, checked.conf)

    def _known_tasks(self) -> list[TaskInfo]:
        """The pods bound and holding resources, and this scheduler's pending ones."""
        with self.cache.lock:  # informer threads change both
            return [*self.cache.running.values(), *(entry.task for entry in self.queue)]

    def _reloaded(self, checked: Checked) -> None:
        assert checked.framework is not None
        self._next = checked.framework
        self.conf_reloads.add(1, "applied")
        self.conf_ok.set(1)
        self.queue.work.set()

    def _refused(self, checked: Checked) -> None:
        self.conf_reloads.add(1, "refused")
        self.conf_ok.set(0)
        errors = checked.problems.errors
        message = f"conf {checked.source} refused, the running conf stays: " + "; ".join(p.message for p in errors)
        involved = self._event_target()
        if involved is None:
            return
        body = event_body(involved, involved["namespace"], self.component, "Warning", "SchedulerConfRefused", message)
        post_event(self.http, body)

    def _event_target(self) -> dict[str, str] | None:
        """The scheduler's own Pod (downward API), else its Lease, else None."""
        pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        if pod and namespace:
            return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod}
        if self.elector is not None:
            return {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "namespace": self.options.lease_namespace,
                "name": self.options.lease_name,
            }
        return None

    # -- health ----------------------------------------------------------------------------
    def _health_checks(self) -> list[tuple[str, Callable[[], str | None]]]:
        checks: list[tuple[str, Callable[[], str | None]]] = [("ping", lambda: None), ("scheduler", self._alive)]
        if self.elector is not None:
            checks.append(("leaderElection", self._lease_fresh))
        return checks

    def _alive(self) -> str | None:
        return None if self._thread is not None and self._thread.is_alive() else "the scheduling thread has stopped"

    def _lease_fresh(self) -> str | None:
        elector = self.elector
        if elector is None or not elector.leading.is_set():
            return None  # a standby is healthy
        late = elector.clock() - elector.renewed_at - elector.lease_seconds
        return f"the Lease was last renewed {late:.0f}s past its duration" if late > LEASE_TOLERANCE_S else None

    def _serve(self) -> None:
        routes: dict[str, dict[str, Route]] = {}
        tls: Tls | None = None
        if self.options.healthz_address is not None:
            routes.setdefault(self.options.healthz_address, {})["/healthz"] = healthz_route(self._health_checks())
            ca, cert, key = self.options.tls
            tls = Tls(ca, cert, key) if ca and cert and key else None
        if self.options.metrics_address is not None:
            routes.setdefault(self.options.metrics_address, {})["/metrics"] = metrics_route(self.registry)
        for address, served in routes.items():
            secure = tls if "/healthz" in served else None
            self.endpoints.append(Endpoint(address, served, secure).start())
            log.info("serving %s at %s%s", " and ".join(sorted(served)), address, " (TLS)" if secure else "")

    # -- running ---------------------------------------------------------------------------
    def start(self) -> Scheduler:
        log.info("scheduler %s starting (protocol fingerprint %s)", ", ".join(self.names), self.protocol.fingerprint)
        if self.options.signer is None:
            log.warning("no assignment key: assignments are bound unsigned and device plugins will refuse them")
        self._serve()
        for informer in self.informers:
            informer.start()
        if self.elector is not None:
            self.elector.start()
        self._thread = threading.Thread(target=self._loop, name="scheduling", daemon=True)
        self._thread.start()
        if self.watcher is not None:
            self.watcher.start()
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
            len(self.cache.running) + len(self.queue),
        )
        queues_ensured = False
        last = last_queues = 0.0
        while not self._stop.is_set():
            self.queue.work.wait(self.options.idle_wakeup)
            self.queue.work.clear()
            if self._stop.is_set():
                break
            if self._next is not None:  # between two sessions: the reloaded conf takes over
                framework, self._next = self._next, None
                self._use(framework)
                log.info("conf reloaded: actions %s", ", ".join(framework.action_names))
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
                self.live.sync_queues()
            self.live.write_notices()
            if not self.live.has_work("enqueue" in self.framework.enabled_actions):
                continue
            last = time.monotonic()
            try:
                self.framework.run_once(self._observed)
                self.sessions += 1
            except Exception as exc:
                log.exception("scheduling session failed")
                self.live.session_failed(exc)
            if self.queue.has_work():
                self.queue.work.set()

    def _ensure_queues(self) -> None:
        """Create the queues Volcano always has (the default queue, `root`) where Queues are served."""
        if self.kube_binder is None:
            return
        for name in dict.fromkeys((self.options.default_queue, ROOT_QUEUE)):
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
        self.queue.work.set()
        if self.watcher is not None:
            self.watcher.stop()
        if self._thread is not None:
            self._thread.join(10)
        for informer in self.informers:
            informer.stop(timeout=1.0)
        self.cache.volumes.close()  # a PreBind waiting for the PV controller gives up
        self.binder.close()
        if self.events is not None:
            self.events.close()
        if self.elector is not None:
            self.elector.stop()
            self.elector.release()
        for endpoint in self.endpoints:
            endpoint.stop()
