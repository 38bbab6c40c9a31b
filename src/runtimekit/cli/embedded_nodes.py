"""The embedded cluster's simulated nodes: one `SimulatedNode` per node, started in *plugin* mode (the
kubelet's `DeviceManager` and PodResources server, the node runtime on the simulated backend, the
device plugin registered with that kubelet, the `SimulatedKubelet`) or in *direct* mode (only the
kubelet, advertising the GPUs itself). `runtimekit.cli.embedded` starts them, as their `NodeHost`:
this module knows the cluster only through that interface and never imports `embedded`."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cli.embedded_dra import kubelet_dra_devices, start_dra_plugin
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devicemanager import DeviceManager
from runtimekit.cluster.kubelet.devices import DirectDevices, NodeDevices, PluginDevices
from runtimekit.cluster.kubelet.kubelet import KubeletOptions, SimulatedKubelet
from runtimekit.cluster.kubelet.nodestatus import NodeShape
from runtimekit.cluster.kubelet.podresources import serve_pod_resources
from runtimekit.cluster.kubelet.runner import ContainerRunner
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer
from runtimekit.kube.nodeapi import KubeNodeApi
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

log = logging.getLogger(__name__)
SOCKET_PATH_LIMIT = 100  # sun_path holds 107 bytes; the longest socket name below is ~52
SOCKET_NAME_ROOM = 60
RECONCILE_GRACE_S = 0.2  # a bound pod is always in the API server's list, so a short grace is safe


@dataclass(frozen=True)
class NodeOptions:
    """What every node of a cluster is started with (from `ClusterOptions`)."""

    cpu: str = "64"
    memory: str = "512Gi"
    gpus: int = 8
    gpu_model: str = "H200"
    isolation: str = "none"  # plugin mode: the runtime's --isolation
    mig_mode: str = ""  # plugin mode: the runtime's --mig-mode
    mig_layout: str = ""  # plugin mode: the runtime's --mig-layout
    seed: int = 0
    reconcile_s: float = 2.0  # the runtime's reconcile interval
    runner: ContainerRunner | None = None  # runs a pod's `runtimekit` containers
    dra: bool = False  # plugin mode: the DRA plugin beside the device plugin (`embedded_dra`)


class StartedExporter(Protocol):
    """What an exporter factory returns: where it serves, and how to stop it."""

    url: str

    def stop(self) -> None: ...


class NodeHost(Protocol):
    """What a node needs of the cluster that starts it (`runtimekit.cli.embedded.EmbeddedCluster`)."""

    @property
    def protocol(self) -> KitProtocol: ...

    @property
    def state_dir(self) -> Path:
        """Nodes keep their files under `<state_dir>/nodes/<name>`."""
        ...

    @property
    def socket_root(self) -> Path:
        """Nodes make their unix sockets under `<socket_root>/n<index>` (a short path)."""
        ...

    @property
    def node_options(self) -> NodeOptions: ...

    def key_folder(self, part: str) -> Path:
        """The folder of the keys `part` ("scheduler" or a node's name) signs or verifies assignments with."""
        ...

    @property
    def api(self) -> ApiServer:
        """The API server, with which a node's kubelet registers as a kubelet hook."""
        ...

    def http(self, agent: str) -> KubeHttp:
        """A client of the cluster's API server with this user agent (the node closes it)."""
        ...

    def expected_inventory(self, node: str) -> NodeInventory:
        """The node's simulated GPUs."""
        ...

    def memory_unit(self, node: str) -> int:
        """MiB per gpu-memory device on the node: its device plugin's `--memory-unit`."""
        ...

    def gpu_model(self, node: str) -> str:
        """The model of the node's simulated GPUs."""
        ...


@dataclass
class SimulatedNode:
    """One node's parts; `runtime_socket` is None in direct mode."""

    name: str
    index: int
    folder: Path
    kubelet: SimulatedKubelet
    http: KubeHttp
    runtime_socket: str | None = None
    parts: list[Callable[[], None]] = field(default_factory=list)  # stop functions, in stop order
    runtime: Any = None  # runtimekit.runtime.daemon.RuntimeDaemon in plugin mode
    resources: dict[str, int] = field(default_factory=dict)  # what kubelet advertises once the node is up
    exporter: StartedExporter | None = None
    informers: list[Informer[Any]] = field(default_factory=list)  # parts' informers, for the cluster to stop

    def stop(self) -> None:
        for stop in [self.kubelet.stop, *self.parts, self.http.close]:
            try:
                stop()
            except Exception:  # stop the rest regardless
                log.exception("node %s: stopping a part failed", self.name)


def socket_root(state_dir: Path) -> Path:
    """Where the unix sockets go: the state folder when its path is short enough, else a short temp folder."""
    if len(str(state_dir / "n00" / "plugins")) + SOCKET_NAME_ROOM <= SOCKET_PATH_LIMIT:
        return state_dir
    short = "/tmp" if Path("/tmp").is_dir() else None  # $TMPDIR may be as long as the state folder
    return Path(tempfile.mkdtemp(prefix="rk-", dir=short))


# -- nodes ---------------------------------------------------------------------------------------
def _shape(cluster: NodeHost, name: str) -> NodeShape:
    return NodeShape(name, cpu=cluster.node_options.cpu, memory=cluster.node_options.memory)


def _kubelet_options(cluster: NodeHost, name: str, index: int, folder: Path, socket: str | None) -> KubeletOptions:
    return KubeletOptions(
        _shape(cluster, name), cluster.protocol, runtime_socket=socket, work_dir=folder / "containers", node_index=index
    )


def start_direct_node(cluster: NodeHost, name: str, index: int) -> SimulatedNode:
    """A node whose kubelet advertises the simulated GPUs itself (no runtime, no device plugin)."""
    folder = cluster.state_dir / "nodes" / name
    http = cluster.http(f"runtimekit-kubelet/{name}")
    devices = DirectDevices(cluster.expected_inventory(name), cluster.protocol, cluster.memory_unit(name))
    options = _kubelet_options(cluster, name, index, folder, None)
    kubelet = SimulatedKubelet(http, devices, options, cluster.node_options.runner)
    node = SimulatedNode(name, index, folder, kubelet, http, resources=devices.capacity())
    cluster.api.add_kubelet_hook(kubelet)
    kubelet.start()
    return node


def start_plugin_node(cluster: NodeHost, name: str, index: int) -> SimulatedNode:
    """A node with the real node components: kubelet device manager, runtime, device plugin, kubelet."""
    folder = cluster.state_dir / "nodes" / name
    sockets = cluster.socket_root / f"n{index}"
    sockets.mkdir(parents=True, exist_ok=True)
    runtime_socket = str(sockets / "runtime.sock")
    http = cluster.http(f"runtimekit-node/{name}")
    manager = DeviceManager(sockets / "plugins").start()
    options = _kubelet_options(cluster, name, index, folder, runtime_socket)
    devices: NodeDevices = PluginDevices(manager)
    dra_devices = None
    if cluster.node_options.dra:
        devices = dra_devices = kubelet_dra_devices(devices, http, sockets, folder)
    kubelet = SimulatedKubelet(http, devices, options, cluster.node_options.runner)
    node = SimulatedNode(name, index, folder, kubelet, http, runtime_socket, parts=[manager.stop])
    try:
        cluster.api.add_kubelet_hook(kubelet)
        kubelet.start()
        pod_resources = sockets / "pod-resources.sock"
        server = serve_pod_resources(manager, pod_resources, kubelet.running_pods)
        node.parts.insert(0, lambda: _stop_server(server))
        node.runtime = _start_runtime(cluster, node, folder, str(pod_resources))
        node.parts.insert(0, node.runtime.stop)
        node.resources = _plugin_resources(cluster, runtime_socket, cluster.memory_unit(name))
        node.parts.insert(0, _start_device_plugin(cluster, node, sockets / "plugins", pod_resources))
        if cluster.node_options.dra:
            http_dra = _own_client(cluster, node, "runtimekit-dra-plugin")  # deploy/draplugin's ServiceAccount
            node.parts.insert(
                0, start_dra_plugin(cluster.protocol, node.name, runtime_socket, http_dra, sockets, folder)
            )
        if dra_devices is not None:
            node.parts.insert(0, dra_devices.close)  # the health streams go before the plugin does
        kubelet.on_pod_stopped.append(lambda _pod: _reconcile_now(node))
    except BaseException:
        cluster.api.remove_kubelet_hook(kubelet)
        node.stop()
        raise
    return node


def _plugin_resources(cluster: NodeHost, runtime_socket: str, unit: int) -> dict[str, int]:
    """What the device plugin will advertise per resource, from the runtime's GPUs as it lists them."""
    from runtimekit.deviceplugin.resources import advertised, resource_specs

    with RuntimeClient(runtime_socket) as client:
        devices = client.list_devices()
    return {spec.name: len(advertised(spec, devices, unit)) for spec in resource_specs(devices, cluster.protocol)}


def _start_runtime(cluster: NodeHost, node: SimulatedNode, folder: Path, pod_resources: str) -> Any:
    from runtimekit.api.podresources_client import PodResourcesClient
    from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime

    options = cluster.node_options
    assert node.runtime_socket is not None
    runtime_options = RuntimeOptions(
        backend="simulated",
        socket_path=node.runtime_socket,
        state_dir=folder / "runtime",
        node_name=node.name,
        protocol=cluster.protocol,
        isolation=options.isolation,
        mig_mode=options.mig_mode,
        mig_layout=options.mig_layout,
        simulate_gpus=f"{options.gpus}x{cluster.gpu_model(node.name)}",
        seed=options.seed + node.index,
        mps_pipe_dir=str(folder / "mps" / "pipe"),
        mps_log_dir=str(folder / "mps" / "log"),
        hami_lib_dir=str(folder / "vgpu"),  # the simulated node's: HAMi-core's per-container folders go here
        reconcile_interval_s=options.reconcile_s,
        reconcile_grace_s=RECONCILE_GRACE_S,
    )
    api = KubeNodeApi(_own_client(cluster, node, "runtimekit-runtime"))  # deploy/runtime's ServiceAccount
    runtime = build_runtime(runtime_options, api, PodResourcesClient(pod_resources), api)
    return RuntimeDaemon(runtime, node.runtime_socket, options.reconcile_s).start()


def _start_device_plugin(
    cluster: NodeHost, node: SimulatedNode, plugin_dir: Path, pod_resources: Path
) -> Callable[[], None]:
    """Start the device plugin against the node's runtime and kubelet; returns its stop function."""
    from runtimekit.api.podresources_client import PodResourcesClient
    from runtimekit.base.keyring import KeyRing
    from runtimekit.deviceplugin.manager import DevicePluginManager
    from runtimekit.deviceplugin.publisher import NodePublisher
    from runtimekit.deviceplugin.service import DevicePluginService, DeviceState, PluginSettings

    assert node.runtime_socket is not None
    client = RuntimeClient(node.runtime_socket)
    lister = PodResourcesClient(str(pod_resources))
    try:
        if not client.wait_ready(30.0):
            raise TimeoutError(f"the runtime of node {node.name} did not answer on {node.runtime_socket}")
        client.require("devices", "watch-devices", "allocate")
        kube = KubeNodeApi(_own_client(cluster, node, "runtimekit-device-plugin"))  # deploy/deviceplugin's
        pods = kube.node_pods(node.name).start()
        unit = cluster.memory_unit(node.name)
        keys = KeyRing.from_folder(cluster.key_folder(node.name))
        settings = PluginSettings(node.name, cluster.protocol, unit, keys=keys)
        service = DevicePluginService(settings, client, kube, DeviceState(), pods, lister)
        publisher = NodePublisher(kube, node.name, cluster.protocol, unit)
        manager = DevicePluginManager(service, client.watch_devices, plugin_dir, publisher).start(30.0)
        node.informers.append(pods.informer)
    except BaseException:
        client.close()
        lister.close()
        raise

    def stop() -> None:
        manager.stop()
        pods.stop()
        client.close()
        lister.close()

    return stop


def _own_client(cluster: NodeHost, node: SimulatedNode, kind: str) -> KubeHttp:
    """A client of the node part `kind` with its own credentials, closed when the node stops."""
    http = cluster.http(f"{kind}/{node.name}")
    node.parts.append(http.close)
    return http


def _stop_server(server: Any) -> None:
    server.stop(0).wait()


def _reconcile_now(node: SimulatedNode) -> None:
    """Let the node runtime release a stopped pod's allocation before the kubelet admits anything else.

    Runs on the kubelet's pod thread, as kubelet's device manager frees a terminated pod's devices
    before the next admission: the scheduler books a deleted pod's GPU again at once, and the
    runtime would refuse the next pod's Allocate while it still held the old allocation."""
    try:
        node.runtime.runtime.reconcile()
    except Exception:
        log.exception("node %s: runtime reconcile failed", node.name)
