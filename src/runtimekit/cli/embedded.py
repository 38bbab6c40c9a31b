"""The embedded cluster in one process: API server, simulated nodes and the kit's cluster components.

`start_cluster(ClusterOptions(...))` returns a started `EmbeddedCluster` once every node is Ready with
its GPU resources advertised and the scheduler has seen every node's GPUs; `stop()` (or `with`) ends
it all. `runtimekit up`, `runtimekit demo` and the tests use it. Per node (`SimulatedNode`, started by
`runtimekit.cli.embedded_nodes`):
- *plugin* mode (default): the kubelet's `DeviceManager` and PodResources server, the node runtime
  (`runtimekit.runtime`, simulated backend) on a unix socket, the device plugin
  (`runtimekit.deviceplugin`) registered with that kubelet, and the `SimulatedKubelet`;
- *direct* mode: only the `SimulatedKubelet`, advertising the GPUs itself (`DirectDevices`).
Cluster-wide, on threads: the Job controller, the workload controllers (garbage collector,
Deployments, ReplicaSets, StatefulSets, Volcano Jobs and the unscheduled-pod check:
`runtimekit.cluster.controllers.manager`), the scheduler (`examples/scheduler/gpushare.conf` when
the repository is at hand, else the built-in conf; it answers to the protocol's scheduler name and
`ClusterOptions.scheduler_names`, `default-scheduler` by default) and the node controller. Pods whose
container runs `runtimekit <subcommand>` (the controller's job-agent Jobs) are run in process by
`run_runtimekit` against their node's runtime socket.
The exporter plugs in through `ClusterOptions.exporter` (`runtimekit up` passes
`runtimekit.cli.node_exporter.start_node_exporter`) — a
factory called once per started node that returns something with `url` and `stop()`; its URL then
appears in `cluster.json` (`exporter`, null until then).
These two modules are the only place that wires components together; `embedded_nodes` knows the
cluster only as its `NodeHost` and never imports this module.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast

from runtimekit.base.keyring import ensure_key_folder
from runtimekit.cli.embedded_dra import install_device_classes
from runtimekit.cli.embedded_identity import connect_as
from runtimekit.cli.embedded_nodes import (
    NodeOptions,
    SimulatedNode,
    StartedExporter,
    socket_root,
    start_direct_node,
    start_plugin_node,
)
from runtimekit.cli.embedded_rbac import load_rbac
from runtimekit.cli.embedded_webhook import StartedWebhook, remove_configurations, start_webhook
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.localpath import LocalPathProvisioner, ensure_default_class
from runtimekit.cluster.controllers.manager import ControllerManager, default_controllers
from runtimekit.cluster.jobs import JobController
from runtimekit.cluster.kubelet.runner import (
    ContainerRunner,
    NodeContext,
    capture_output,
    map_paths,
    runtimekit_argv,
)
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import Container, Node, Pod, annotations_of, meta
from runtimekit.model import NodeInventory, gpu_model
from runtimekit.protocol import KitProtocol, ProtocolError, load_protocol
from runtimekit.protocol.names import memory_unit_mib
from runtimekit.protocol.presets import PRESETS, preset_text

if TYPE_CHECKING:  # built on demand: `runtimekit up --no-scheduler` need not import the scheduler
    from runtimekit.controller.server import ControllerServer
    from runtimekit.scheduler.server import Scheduler

log = logging.getLogger(__name__)
REPO_ROOT = Path(__file__).resolve().parents[3]
JOBS_NAMESPACE = "lj-runtimekit-jobs"  # the controller's --namespace in deploy/controller
EXAMPLE_CONF = REPO_ROOT / "examples" / "scheduler" / "gpushare.conf"
BOOKMARK_S = 1.0  # watches wake at least this often, so informers stop within it


ExporterFactory = Callable[[SimulatedNode, KitProtocol], StartedExporter | None]  # with the cluster's protocol


class Component(Protocol):
    """A cluster-wide part the cluster stops, newest first."""

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = 4
    gpus_per_node: int = 8
    gpu_model: str = "H200"  # every node's, or several taken in turn over the nodes: A100-80GB,H200
    port: int = 0
    state_dir: Path | None = None  # None: a temporary folder, removed at stop
    direct: bool = False
    isolation: str = "none"  # none | mps | hami-core (plugin mode)
    mig_mode: str = ""  # the runtimes' --mig-mode (plugin mode): off|static|dynamic or INDEX:MODE,...
    mig_layout: str = ""  # the runtimes' --mig-layout for static MIG GPUs
    memory_unit: str = ""  # gpu-memory unit per node: UNIT for all, or NAME=UNIT,...; "": the protocol's
    scheduler: bool = True
    scheduler_conf: str | None = None  # None: examples/scheduler/gpushare.conf, else the built-in conf
    scheduler_names: tuple[str, ...] = ("default-scheduler",)  # answered besides the protocol's name
    scheduler_plugins_dir: str | None = None  # the scheduler's --plugins-dir (custom actions and plugins)
    controller: bool = True
    webhook: bool = False  # the kit's admission webhook (`runtimekit up` runs it unless --no-webhook)
    dra: bool = False  # plugin mode: a DRA kubelet plugin per node, and kubelets that prepare pods' claims
    protocol_path: str | None = None
    node_prefix: str = "gpu-node-"
    node_cpu: str = "64"
    node_memory: str = "512Gi"
    runner: ContainerRunner | None = field(default_factory=lambda: run_runtimekit)
    exporter: ExporterFactory | None = None
    reconcile_s: float = 2.0  # the runtimes' reconcile interval
    seed: int = 0
    # The folder each part reads the assignment key from, by part ("scheduler" or a node's name); None:
    # one folder in the state folder for all. Tests give each part its own, to show each a rotated
    # Secret at its own time, as kubelet refreshes each mount on its own schedule.
    key_folders: Callable[[str], Path] | None = None

    def validate(self) -> None:
        """Raises ValueError naming the bad option."""
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("--nodes and --gpus-per-node must be at least 1")
        if self.isolation not in ("none", "mps", "hami-core"):
            raise ValueError(f"--isolation must be none, mps or hami-core, got {self.isolation!r}")
        try:
            specs = [gpu_model(model) for model in self.gpu_models()]
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
        if not specs:
            raise ValueError("--gpu-model names no model")
        if self.mig_mode or self.mig_layout:
            self._validate_mig(all(spec.mig_capable for spec in specs))
        if self.dra and self.direct:
            raise ValueError("--dra needs the node runtime and plugins: not with --direct")
        self.memory_units(0)

    def node_names(self) -> list[str]:
        return [f"{self.node_prefix}{index}" for index in range(1, self.nodes + 1)]

    def memory_units(self, default_mib: int) -> dict[str, int]:
        """MiB per gpu-memory device of each node (`memory_unit`, else `default_mib`), as each node's
        device plugin (or, in direct mode, kubelet) advertises them. Raises ValueError naming the
        bad entry: `512Mi` for every node, `gpu-node-2=512Mi,gpu-node-3=256Mi` per node, or both."""
        units = dict.fromkeys(self.node_names(), default_mib)
        named: set[str] = set()
        bare: int | None = None
        for entry in filter(None, (e.strip() for e in self.memory_unit.split(","))):
            name, equals, value = entry.rpartition("=")
            try:
                mib = memory_unit_mib(value)
            except ValueError as exc:
                raise ValueError(f"--memory-unit {entry!r}: {exc}") from None
            if not equals:
                if bare is not None:
                    raise ValueError(f"--memory-unit: one unit for all nodes at most, got {self.memory_unit!r}")
                bare = mib
            elif name not in units:
                raise ValueError(f"--memory-unit {entry!r}: no node {name!r} (nodes: {', '.join(units)})")
            elif name in named:
                raise ValueError(f"--memory-unit: node {name!r} is named twice")
            else:
                units[name] = mib
                named.add(name)
        if bare is not None:
            units.update({name: bare for name in units if name not in named})
        return units

    def gpu_models(self) -> list[str]:
        """The models of `gpu_model`: one for every node, or several (`A100,H200`) taken in turn."""
        return [model.strip() for model in self.gpu_model.split(",") if model.strip()]

    def gpu_model_of(self, index: int) -> str:
        """The GPU model of node `index` (from 1): the models of `gpu_model` in turn."""
        models = self.gpu_models()
        return gpu_model(models[(index - 1) % len(models)]).name

    @property
    def node_options(self) -> NodeOptions:
        return NodeOptions(
            cpu=self.node_cpu,
            memory=self.node_memory,
            gpus=self.gpus_per_node,
            gpu_model=self.gpu_model,
            isolation=self.isolation,
            mig_mode=self.mig_mode,
            mig_layout=self.mig_layout,
            seed=self.seed,
            reconcile_s=self.reconcile_s,
            runner=self.runner,
            dra=self.dra,
        )

    def _validate_mig(self, capable: bool) -> None:
        from runtimekit.runtime.mig import parse_mig_config

        if self.direct:
            raise ValueError("--mig-mode needs the runtime and device plugin: drop --direct")
        if not capable:
            raise ValueError(f"--gpu-model {self.gpu_model} has no MIG: use an A100, A30, H100 or H200")
        parse_mig_config(self.mig_mode, self.mig_layout).expand(self.gpus_per_node)


class EmbeddedCluster:
    """A started embedded cluster; see the module docstring."""

    def __init__(self, options: ClusterOptions, protocol: KitProtocol, state_dir: Path, owns_state: bool) -> None:
        self.options, self.protocol = options, protocol
        self._memory_units = options.memory_units(protocol.memory_unit_mib)  # node name -> MiB per device
        self.state_dir, self._owns_state = state_dir, owns_state
        self.api = ApiServer(
            port=options.port,
            state_dir=None if owns_state else state_dir / "apiserver",
            protocol=protocol,
            bookmark_interval=BOOKMARK_S,
        )
        self.url = ""
        self.kubeconfig = state_dir / "kubeconfig"
        self.info_path = state_dir / "cluster.json"
        self.nodes: list[SimulatedNode] = []
        self.components: list[tuple[str, Component]] = []  # (name, component), started order
        self.scheduler: Scheduler | None = None
        self.controller: ControllerServer | None = None
        self.jobs: JobController | None = None
        self.workloads: ControllerManager | None = None
        self.webhook: StartedWebhook | None = None
        self.socket_root = socket_root(state_dir)
        self.assignment_keys = ensure_key_folder(state_dir / "assignment-keys")  # kept with a kept state folder
        self._stopped = False

    @property
    def expected_gpus(self) -> int:
        return self.options.gpus_per_node

    @property
    def node_options(self) -> NodeOptions:
        return self.options.node_options

    def memory_unit(self, node: str) -> int:
        return self._memory_units[node]

    def key_folder(self, part: str) -> Path:
        """The folder `part` ("scheduler" or a node's name) reads the assignment key from."""
        folders = self.options.key_folders
        return folders(part) if folders is not None else self.assignment_keys

    def http(self, agent: str) -> KubeHttp:
        """A client with `agent`'s own credentials (runtimekit.cli.embedded_identity)."""
        return connect_as(self.api, self.state_dir, agent)

    # -- readiness -----------------------------------------------------------------------------
    def not_ready(self) -> list[str]:
        """What is not up yet (empty when everything is)."""
        missing = [f"node {n.name}" for n in self.nodes if not self._node_ready(n)]
        if self.scheduler is not None and not self._scheduler_ready():
            missing.append("scheduler")
        if self.jobs is not None and not self.jobs.synced(0):
            missing.append("job controller")
        if self.workloads is not None and not self.workloads.synced(0):
            missing.append("workload controllers")
        if self.controller is not None and not self.controller.synced(0):
            missing.append("controller")
        return missing

    def _node_ready(self, node: SimulatedNode) -> bool:
        try:
            obj = cast(Node, node.http.get(f"/api/v1/nodes/{node.name}"))
        except KubeError:
            return False
        status = obj.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        allocatable = status.get("allocatable") or {}
        advertised = all(str(allocatable.get(k)) == str(v) for k, v in node.resources.items())
        annotated = self.protocol.annotations.node_devices in annotations_of(obj)
        return ready and advertised and annotated

    def gpu_model(self, node: str) -> str:
        """The GPU model of a node (`ClusterOptions.gpu_model`, taken in turn over the nodes)."""
        prefix = self.options.node_prefix
        index = int(node[len(prefix) :]) if node.startswith(prefix) and node[len(prefix) :].isdigit() else 1
        return self.options.gpu_model_of(index)

    def expected_inventory(self, node: str) -> NodeInventory:
        """A node's simulated GPUs (the simulated backend derives the same UUIDs from the node name)."""
        return NodeInventory.simulated(node, self.gpu_model(node), self.options.gpus_per_node)

    def _scheduler_ready(self) -> bool:
        if self.scheduler is None or not self.scheduler.synced(0):
            return False
        cache = self.scheduler.cache
        with cache.lock:
            known: dict[str, int] = {name: len(state.inventory.gpus) for name, state in cache.nodes.items()}
        return all(known.get(n.name) == self.expected_gpus for n in self.nodes)

    def restart_scheduler(self) -> Scheduler:
        """Stop the scheduler and start a new one, which rebuilds every booking from the API server's
        pods, as a crashed or rolled-out scheduler does; returns the new one, started (not yet synced)."""
        old = self.scheduler
        if old is None:
            raise RuntimeError("this cluster runs no scheduler")
        old.stop()
        scheduler = self.scheduler = _start_scheduler(self)
        self.components = [(n, scheduler if c is old else c) for n, c in self.components]
        return scheduler

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Block until everything is up; TimeoutError names what is not."""
        deadline = time.monotonic() + timeout_s
        while missing := self.not_ready():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"not ready after {timeout_s:g} s: {', '.join(missing)}")
            time.sleep(0.1)

    # -- the record ----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What `cluster.json` holds."""
        return {
            "api_server": self.url,
            "kubeconfig": str(self.kubeconfig),
            "nodes": [
                {
                    "name": n.name,
                    "runtime_socket": n.runtime_socket,
                    "exporter": n.exporter.url if n.exporter is not None else None,
                }
                for n in self.nodes
            ],
        }

    def node(self, name: str) -> SimulatedNode:
        return next(n for n in self.nodes if n.name == name)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop everything; idempotent. A temporary state folder is removed.

        Every informer is told to stop and the API server ends the watches they wait on, so none
        waits for a bookmark; then the components and the nodes stop side by side (each node's parts
        in order, as a node's own stop does), each on a thread of its own, so the cluster stops in
        about the time of its slowest part rather than the sum of all (`runtimekit up` on SIGTERM)."""
        if self._stopped:
            return
        self._stopped = True
        self._signal_informers()
        for node in self.nodes:
            self.api.remove_kubelet_hook(node.kubelet)
        stops = [(name, component.stop) for name, component in reversed(self.components)]
        stops += [(f"node {node.name}", node.stop) for node in reversed(self.nodes)]
        _stop_side_by_side(stops)
        self.api.close()
        if self.socket_root != self.state_dir:
            shutil.rmtree(self.socket_root, ignore_errors=True)
        if self._owns_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        log.info("embedded cluster stopped")

    def _signal_informers(self) -> None:
        """Tell every informer to stop and end the watches they are in, so each leaves at once and
        the components' own stop() calls find them gone."""
        informers: list[Informer[Any]] = [i for n in self.nodes for i in (n.kubelet.informer, *n.informers)]
        for component in (self.scheduler, self.controller, self.jobs, self.workloads, self.webhook):
            if component is not None:
                informers += component.informers
        for informer in informers:
            informer.stop(0)
        self.api.end_watches()

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _stop_side_by_side(stops: list[tuple[str, Callable[[], None]]], timeout_s: float = 30.0) -> None:
    """Call every stop function at once, each on its own thread, and wait for them all."""

    def run(name: str, stop: Callable[[], None]) -> None:
        try:
            stop()
        except Exception:
            log.exception("stopping %s failed", name)

    threads = [threading.Thread(target=run, args=item, name=f"stop {item[0]}", daemon=True) for item in stops]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


# -- cluster components --------------------------------------------------------------------------
def _start_scheduler(cluster: EmbeddedCluster) -> Scheduler:
    """The scheduler with the cluster's protocol and key, at the scheduler's own defaults otherwise;
    its conf file is not watched for changes."""
    from runtimekit.scheduler.build import AssignmentKeys, LeaderElection, SchedulerConfig, build_scheduler

    options = cluster.options
    conf = options.scheduler_conf
    if conf is None and EXAMPLE_CONF.is_file():
        conf = str(EXAMPLE_CONF)
    config = SchedulerConfig(
        kube=cluster.http("runtimekit-scheduler"),
        conf=conf,
        protocol=cluster.protocol,
        scheduler_names=options.scheduler_names,
        plugins_dir=options.scheduler_plugins_dir,
        seed=options.seed,
        keys=AssignmentKeys(cluster.key_folder("scheduler")),
        leader_election=LeaderElection(identity="embedded"),
    )
    scheduler = build_scheduler(config)
    log.info("scheduler conf: %s; plugins dir: %s", conf or "built-in", config.plugins_dir or "none")
    return scheduler.start()


def answered_names(options: ClusterOptions, protocol: KitProtocol) -> tuple[str, ...]:
    """The schedulerName values the embedded scheduler takes pods of (none without a scheduler)."""
    if not options.scheduler:
        return ()
    return tuple(dict.fromkeys((protocol.scheduler_name, *protocol.scheduler_aliases, *options.scheduler_names)))


def _start_workload_controllers(cluster: EmbeddedCluster) -> ControllerManager:
    """Volcano Jobs without a schedulerName go to the kit's scheduler (Volcano's webhook would name its own);
    claims of the default class `standard` are provisioned in the nodes' folders."""
    answered = answered_names(cluster.options, cluster.protocol)
    factories = default_controllers(cluster.protocol.scheduler_name, answered)
    # kind's storage: its default class `standard` and the local-path provisioner, in the nodes' folders
    nodes_root = cluster.state_dir / "nodes"
    factories.append(lambda http, informers: LocalPathProvisioner(http, informers, nodes_root))
    http = cluster.http("runtimekit-controller-manager")
    ensure_default_class(http)
    return ControllerManager(http, factories).start()


def _start_controller(cluster: EmbeddedCluster) -> ControllerServer:
    from runtimekit.controller.jobs import JobTemplate
    from runtimekit.controller.reconciler import ControllerOptions, NodeController
    from runtimekit.controller.server import ControllerServer
    from runtimekit.controller.trigger import LabelTrigger

    http = cluster.http("runtimekit-controller")
    protocol = cluster.protocol
    options = ControllerOptions(namespace=JOBS_NAMESPACE, image="runtimekit:embedded")
    controller = NodeController(http, protocol, LabelTrigger(protocol), JobTemplate(), options)
    return ControllerServer(http, controller, resync=30.0).start()


def start_cluster(options: ClusterOptions | None = None, ready_timeout_s: float = 120.0) -> EmbeddedCluster:
    """Start everything and wait until it is ready; on any failure, stop what started and raise."""
    options = options or ClusterOptions()
    options.validate()
    owns_state = options.state_dir is None
    state_dir = Path(tempfile.mkdtemp(prefix="rk-up-")) if owns_state else Path(options.state_dir or ".").resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        options = replace(options, protocol_path=protocol_file(options.protocol_path, state_dir))
        protocol = load_protocol(options.protocol_path)
    except BaseException:
        if owns_state:
            shutil.rmtree(state_dir, ignore_errors=True)
        raise
    cluster = EmbeddedCluster(options, protocol, state_dir, owns_state)
    try:
        _start_all(cluster)
        cluster.wait_ready(ready_timeout_s)
        cluster.info_path.write_text(json.dumps(cluster.info(), indent=2) + "\n")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def protocol_file(value: str | None, state_dir: Path) -> str | None:
    """`--protocol`: a protocol file as it is, or the name of a preset (`hami`, `gpushare`,
    `volcano-vgpu`, `nvidia`; runtimekit.protocol.presets) written to `<state_dir>/protocol.yaml`, which
    every component of the cluster then reads. A name that is neither is refused, listing the presets."""
    if value is None or Path(value).exists():
        return value
    if value not in PRESETS:
        if "/" in value or value.endswith((".yaml", ".yml")):
            return value  # a path: the loader says it cannot read it
        raise ProtocolError(f"--protocol {value!r}: no such file, and no such preset ({', '.join(PRESETS)})")
    path = state_dir / "protocol.yaml"
    path.write_text(preset_text(value), encoding="utf-8")
    return str(path)


def _start_all(cluster: EmbeddedCluster) -> None:
    options = cluster.options
    cluster.api.start()
    cluster.url = cluster.api.url
    load_rbac(cluster.api, REPO_ROOT / "deploy")
    install_device_classes(cluster.api, cluster.protocol)
    cluster.api.write_kubeconfig(cluster.kubeconfig)
    jobs = JobController(cluster.http("runtimekit-job-controller")).start()
    cluster.jobs = jobs
    cluster.components.append(("job controller", jobs))
    cluster.workloads = _start_workload_controllers(cluster)
    cluster.components.append(("workload controllers", cluster.workloads))
    start_node = start_direct_node if options.direct else start_plugin_node
    for index in range(1, options.nodes + 1):
        node = start_node(cluster, f"{options.node_prefix}{index}", index)
        cluster.nodes.append(node)
        if options.exporter is not None:
            node.exporter = options.exporter(node, cluster.protocol)
            if node.exporter is not None:
                node.parts.insert(0, node.exporter.stop)
    if options.scheduler:
        scheduler = cluster.scheduler = _start_scheduler(cluster)
        cluster.components.append(("scheduler", scheduler))
    if options.controller:
        controller = cluster.controller = _start_controller(cluster)
        cluster.components.append(("controller", controller))
    if options.webhook:  # started last (it watches the nodes), stopped first
        cluster.webhook = start_webhook(cluster)
        cluster.components.append(("webhook", cluster.webhook))
    else:
        remove_configurations(cluster)


# -- the container runner ------------------------------------------------------------------------
def run_runtimekit(pod: Pod, container: Container, node: NodeContext) -> tuple[int, str]:
    """The default container runner: a `runtimekit <subcommand>` container run in process (see map_paths).
    The message is the termination log when the command wrote one, else the tail of its output."""
    from runtimekit.cli.main import COMMANDS

    argv = runtimekit_argv(container) or []
    if not argv or argv[0] not in COMMANDS:
        return 127, f"runtimekit: unknown command {argv[0] if argv else ''!r}"
    uid = meta(pod).get("uid", "pod")
    termination = node.work_dir / f"{uid}-{container.get('name', 'c')}.log"
    termination.parent.mkdir(parents=True, exist_ok=True)
    argv = map_paths(argv, node, termination)
    module = importlib.import_module(COMMANDS[argv[0]][0])
    parser = argparse.ArgumentParser(prog=f"runtimekit {argv[0]}")
    module.add_arguments(parser)
    with capture_output() as output:
        try:
            code = int(module.run(parser.parse_args(argv[1:])))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    message = termination.read_text(encoding="utf-8") if termination.exists() else output.getvalue()[-4096:]
    return code, message.strip()
