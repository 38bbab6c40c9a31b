"""One way to build the live scheduler: a typed, frozen `SchedulerConfig` in, a `Scheduler` (not yet
started) out. Callers: `runtimekit scheduler`, whose flags become a config (`cli/scheduler.py`), the
embedded cluster (`cli/embedded.py`) and the tests. `build_extender` builds extender mode
(`runtimekit extender`, `scheduler/extender/`) the same way, from an `ExtenderConfig` that carries a
`SchedulerConfig` (the same conf, plugins, protocol, key and leader election) and where to serve.

`build_scheduler` takes the steps of start-up in order and stops at the first that fails, with a
one-line error naming what is wrong: the conf is read and checked with every problem collected
(`ConfCheckFailed` lists each error; warnings are logged), the API server connection is made
(`KubeConfigError`), then the assignment key is read (`ArgumentError`), so that a missing kubeconfig is
reported before a missing key. What the scheduler wires inside is `server.py`'s business: this module
only calls its constructor. The counterpart without an API server (the simulator's) is `inprocess.py`.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from runtimekit.base.keyring import KeyRing, KeyRingError
from runtimekit.kube.http import KubeHttp
from runtimekit.model.authority import Signer
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.extender.schedconfig import DEFAULT_LISTEN, DEFAULT_URL_PREFIX, EXTENDER_CONF_TEXT
from runtimekit.scheduler.extender.server import ExtenderOptions, ExtenderServer
from runtimekit.scheduler.framework import BuildContext, Framework, Registry, SchedulerConf, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.framework.check import Checked, check_file, check_parsed
from runtimekit.scheduler.framework.sampling import NodeSampling
from runtimekit.scheduler.server import Scheduler, SchedulerOptions

__all__ = [
    "AssignmentKeys",
    "ConfCheckFailed",
    "Endpoints",
    "ExtenderConfig",
    "KubeConnection",
    "LeaderElection",
    "SchedulerConfig",
    "build_extender",
    "build_scheduler",
    "registry_and_context",
]

log = logging.getLogger("runtimekit.scheduler")


class ConfCheckFailed(ValueError):
    """The conf has errors; the message lists every one, a line each."""


@dataclass(frozen=True)
class KubeConnection:
    """The API server to connect to: a kubeconfig (None: $KUBECONFIG, the in-cluster service account,
    ~/.kube/config), `master` replacing its server address, and the request rate (qps 0: no limit)."""

    kubeconfig: str | None = None
    master: str | None = None
    qps: float = 2000.0
    burst: int = 2000


@dataclass(frozen=True)
class LeaderElection:
    """A Lease whose holder alone schedules, when `enabled`; client-go's timings, in seconds."""

    enabled: bool = False
    namespace: str = "kube-system"
    name: str | None = None  # None: the scheduler's name (the protocol's)
    identity: str | None = None  # None: host name and process id
    lease_seconds: float = 15.0
    renew_deadline: float | None = None  # None: two thirds of the lease
    renew_every: float = 2.0


@dataclass(frozen=True)
class Endpoints:
    """Where the scheduler serves /healthz and /metrics (None: not served)."""

    healthz: str | None = None
    metrics: str | None = None
    tls: tuple[str | None, str | None, str | None] = (None, None, None)  # CA, certificate, key for /healthz


@dataclass(frozen=True)
class AssignmentKeys:
    """The key assignments are signed with (the Secret lj-runtimekit-assignment-key, shared with the
    device plugins, which refuse what is not signed with it: docs/security.md#assignments). The same
    key ring checks the assignments of pods the scheduler finds bound (a `signer` in hand checks them
    only when it is a `KeyRing`; otherwise their requests alone are checked)."""

    folder: str | Path | None = None  # the key ring's folder (`current`; `next` and `previous` while rotating)
    signer: Signer | None = None  # a key in hand (tests): no folder is read
    required: bool = True  # False: a conf that writes assignments may run unsigned (tests)


@dataclass(frozen=True)
class SchedulerConfig:
    """Everything the live scheduler is built from. `conf` is a parsed conf, or a file (the bare conf
    or a ConfigMap), or None for the built-in conf; `registry` None means the built-in actions and
    plugins with the entry points', and the modules of `plugins_dir` are added to it (each imported
    only when the conf, or a reloaded conf, names it: `Registry.provide`)."""

    kube: KubeHttp | KubeConnection = field(default_factory=KubeConnection)  # a client in hand is used as it is
    conf: SchedulerConf | str | Path | None = None
    reload_conf: bool = False  # rebuild the framework when the conf file changes (looked at every conf_poll)
    allow_conf_without_gpu_plugin: bool = False  # reload a conf that drops GPU plugins pods ask for (conf_guard.py)
    protocol: KitProtocol = field(default_factory=KitProtocol.default)
    scheduler_names: tuple[str, ...] = ()  # schedulerName values taken besides the protocol's own
    registry: Registry | None = None
    plugins_dir: str | None = None
    seed: int = 0  # the build context's RNG (the random policy, tie-breaks)
    keys: AssignmentKeys = AssignmentKeys()
    leader_election: LeaderElection = LeaderElection()
    endpoints: Endpoints = Endpoints()
    default_queue: str = "default"  # the queue of a pod or PodGroup that names none
    node_sampling: NodeSampling | None = None  # None: score every feasible node
    # the server's pacing, at its defaults unless set
    period: float = SchedulerOptions.period
    idle_wakeup: float = SchedulerOptions.idle_wakeup
    retry_seconds: float = SchedulerOptions.retry_seconds
    bind_workers: int = SchedulerOptions.bind_workers
    event_qps: float = SchedulerOptions.event_qps
    event_burst: int = SchedulerOptions.event_burst
    conf_poll: float = SchedulerOptions.conf_poll

    @property
    def names(self) -> tuple[str, ...]:
        """The protocol's scheduler name, then `scheduler_names`, each once."""
        return tuple(dict.fromkeys((self.protocol.scheduler_name, *self.scheduler_names)))

    @property
    def conf_path(self) -> str | None:
        return None if self.conf is None or isinstance(self.conf, SchedulerConf) else str(self.conf)


@dataclass(frozen=True)
class ExtenderConfig:
    """Extender mode: the scheduler's config (its `conf` None means the extender's own default, the GPU
    plugins alone; its leader election's Lease is named `lj-runtimekit-extender` unless named), and
    where kube-scheduler reaches the extender."""

    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    listen: str = DEFAULT_LISTEN
    url_prefix: str = DEFAULT_URL_PREFIX
    bind_wait: float = 1.0  # how long a bind waits for a pod the informer has not shown yet


def _connect_and_sign(config: SchedulerConfig, framework: Framework) -> tuple[KubeHttp, Signer | None]:
    """The API client and the assignment signer of `config`; a client made here is closed when the
    keys are refused."""
    http = _connect(config.kube, config.names[0])
    try:
        return http, assignment_signer(config.keys, writes_assignments(framework))
    except ArgumentError:
        if http is not config.kube:
            http.close()
        raise


def build_extender(config: ExtenderConfig) -> ExtenderServer:
    """The extender of `config`, not started; raises as `build_scheduler` does."""
    inner = config.scheduler
    registry, context = registry_and_context(inner)
    conf = parse_conf(EXTENDER_CONF_TEXT, "<extender default>") if inner.conf is None else inner.conf
    framework = checked_framework(conf, registry, context)
    http, signer = _connect_and_sign(inner, framework)
    election = inner.leader_election
    options = ExtenderOptions(
        listen=config.listen,
        url_prefix=config.url_prefix,
        scheduler_names=inner.scheduler_names,
        bind_wait=config.bind_wait,
        leader_elect=election.enabled,
        lease_name=election.name or ExtenderOptions.lease_name,
        lease_namespace=election.namespace,
        lease_seconds=election.lease_seconds,
        renew_every=election.renew_every,
        renew_deadline=election.renew_deadline,
        signer=signer,
        keys=signer if isinstance(signer, KeyRing) else None,
    )
    if election.identity:
        options.identity = election.identity
    return ExtenderServer(http, framework, inner.protocol, options)


def build_scheduler(config: SchedulerConfig) -> Scheduler:
    """The scheduler of `config`, not started; raises as the module docstring says (and `RegistryError`
    for a plugins folder that cannot be loaded)."""
    registry, context = registry_and_context(config)
    framework = checked_framework(config.conf, registry, context)
    http, signer = _connect_and_sign(config, framework)
    scheduler = Scheduler(http, framework, config.protocol, scheduler_options(config, signer))
    if config.reload_conf:
        scheduler.watch_conf(registry, context)
    return scheduler


def registry_and_context(config: SchedulerConfig) -> tuple[Registry, BuildContext]:
    """The registry actions and plugins are built from and the context they are built with (also
    what `--check-conf` checks against and what a conf reload builds with)."""
    registry = config.registry
    if registry is None:
        registry = builtin_registry()
        registry.load_entry_points()
    if config.plugins_dir:
        offered = registry.add_directory(config.plugins_dir)
        log.info(
            "plugins directory %s offers %s (a module is imported only when the conf names it)",
            config.plugins_dir,
            ", ".join(offered) or "nothing",
        )
    return registry, BuildContext(protocol=config.protocol, rng=random.Random(config.seed))


def checked_framework(conf: SchedulerConf | str | Path | None, registry: Registry, context: BuildContext) -> Framework:
    """The conf checked as `--check-conf` checks it, warnings logged; raises ConfCheckFailed listing every error."""
    checked: Checked
    if isinstance(conf, SchedulerConf):
        checked = check_parsed(conf, registry, context)
    else:
        checked = check_file(conf, registry, context)
    for problem in checked.problems.warnings:
        log.warning("%s", problem.message)
    if checked.framework is None:
        raise ConfCheckFailed("\n".join(p.message for p in checked.problems.errors))
    return checked.framework


def writes_assignments(framework: Framework) -> bool:
    """Whether the conf has a GPU plugin, whose placements become assignments the device plugins check."""
    return bool(framework.plugins.allocate_devices.flat)


def assignment_signer(keys: AssignmentKeys, needed: bool) -> Signer | None:
    """The signer of `keys`; raises ArgumentError when none is found and it is `needed` and required:
    device plugins would refuse every pod."""
    if keys.signer is not None:
        return keys.signer
    folder = keys.folder
    if not folder:
        if needed and keys.required:
            raise ArgumentError(
                "--assignment-keys is required: the folder of the Secret lj-runtimekit-assignment-key, shared with "
                "the device plugins, which refuse assignments not signed with it (docs/security.md#assignments)"
            )
        return None
    try:
        return KeyRing.from_folder(folder)
    except KeyRingError as exc:
        raise ArgumentError(f"--assignment-keys: {exc}") from None


def scheduler_options(config: SchedulerConfig, signer: Signer | None) -> SchedulerOptions:
    """The server's options of `config`."""
    election, endpoints, names = config.leader_election, config.endpoints, config.names
    options = SchedulerOptions(
        period=config.period,
        idle_wakeup=config.idle_wakeup,
        retry_seconds=config.retry_seconds,
        bind_workers=config.bind_workers,
        event_qps=config.event_qps,
        event_burst=config.event_burst,
        leader_elect=election.enabled,
        lease_name=election.name or names[0],
        lease_namespace=election.namespace,
        lease_seconds=election.lease_seconds,
        renew_every=election.renew_every,
        renew_deadline=election.renew_deadline,
        scheduler_names=names,
        default_queue=config.default_queue,
        node_sampling=config.node_sampling,
        conf_path=config.conf_path,
        conf_poll=config.conf_poll,
        allow_conf_without_gpu_plugin=config.allow_conf_without_gpu_plugin,
        healthz_address=endpoints.healthz,
        metrics_address=endpoints.metrics,
        tls=endpoints.tls,
        signer=signer,
        keys=signer if isinstance(signer, KeyRing) else None,  # the ring that signs checks bound pods' assignments
    )
    if election.identity:
        options.identity = election.identity
    return options


def _connect(kube: KubeHttp | KubeConnection, name: str) -> KubeHttp:
    """The client of `kube`: one in hand as it is, else a new one with the request rate set."""
    if isinstance(kube, KubeHttp):
        return kube
    http = KubeHttp.connect(kube.kubeconfig, master=kube.master, user_agent=f"runtimekit-scheduler/{name}")
    http.limit(kube.qps, kube.burst)
    return http
