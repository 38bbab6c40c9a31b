"""Dynamic Resource Allocation in the embedded cluster.

- `install_device_classes`: `runtimekit up` creates the kit's driver's DeviceClasses (NVIDIA's
  `gpu.nvidia.com` and `mig.nvidia.com` under the `nvidia` preset, so NVIDIA's DRA examples name
  classes that exist), as deploy/draplugin/00-deviceclasses.yaml does on a real cluster; called by
  `embedded._start_all` right after the RBAC manifests; a class already there is left as it is.
- with `--dra` (plugin mode), each node runs the DRA plugin in process (`start_dra_plugin`, as
  `runtimekit dra-plugin` does, on the node's runtime and its own ServiceAccount) and its kubelet
  prepares pods' claims through it (`kubelet_dra_devices`); `embedded_nodes.start_plugin_node` calls both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cluster.apiserver.server import ApiServer
from runtimekit.cluster.kubelet.devices import NodeDevices
from runtimekit.cluster.kubelet.dradevices import DraDevices
from runtimekit.cluster.kubelet.draplugins import DraPluginWatcher
from runtimekit.draplugin.cdi import CdiWriter
from runtimekit.draplugin.checkpoint import Checkpoint
from runtimekit.draplugin.manager import Devices, DraPluginManager
from runtimekit.draplugin.names import dra_names
from runtimekit.draplugin.publisher import SlicePublisher
from runtimekit.draplugin.server import PluginServer
from runtimekit.draplugin.service import DraService
from runtimekit.kube.draapi import KubeDraApi
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.objects import JsonObject
from runtimekit.protocol import KitProtocol


def install_device_classes(server: ApiServer, protocol: KitProtocol) -> list[str]:
    """Create the missing DeviceClasses of the protocol's DRA names; returns the names created."""
    api = server.api
    info = api.resource("resource.k8s.io", "v1", "deviceclasses")
    created = []
    for device_class in dra_names(protocol).device_classes():
        name = device_class["metadata"].get("name", "")
        if api.store.get(info, "", name) is None:
            body: JsonObject = dict(device_class)
            api.create(info, "", body)
            created.append(name)
    return created


def kubelet_dra_devices(inner: NodeDevices, http: KubeHttp, sockets: Path, folder: Path) -> DraDevices:
    """A simulated kubelet's devices that also prepare pods' claims through the node's DRA plugin."""
    watcher = DraPluginWatcher(sockets / "registry")
    return DraDevices(inner, watcher, KubeDraApi(http), folder / "cdi")


def start_dra_plugin(
    protocol: KitProtocol, node: str, runtime_socket: str, http: KubeHttp, sockets: Path, folder: Path
) -> Callable[[], None]:
    """The node's DRA plugin, as `runtimekit dra-plugin` runs it; returns what stops it."""
    names = dra_names(protocol)
    client = RuntimeClient(runtime_socket)
    kube = KubeDraApi(http)
    devices = Devices()
    service = DraService(
        names.driver,
        node,
        client,
        kube,
        devices,
        CdiWriter(folder / "cdi", names.cdi_kind),
        Checkpoint(folder / "dra" / "prepared-claims.json"),
    )
    server = PluginServer(service, sockets / "dra", sockets / "registry", devices)
    manager = DraPluginManager(devices, client.watch_devices, server, SlicePublisher(kube, names.driver, node))
    manager.start()

    def stop() -> None:
        manager.stop()
        client.close()

    return stop
