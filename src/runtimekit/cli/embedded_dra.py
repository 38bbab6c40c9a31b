"""The DRA DeviceClasses of the embedded cluster: `runtimekit up` creates the kit's driver's classes
(NVIDIA's `gpu.nvidia.com` and `mig.nvidia.com` under the `nvidia` preset, so NVIDIA's DRA examples
name classes that exist), as deploy/draplugin/00-deviceclasses.yaml does on a real cluster. Called by
`embedded._start_all` right after the RBAC manifests; a class already there (a kept state folder, an
admin's own) is left as it is.
"""

from __future__ import annotations

from runtimekit.cluster.apiserver.server import ApiServer
from runtimekit.draplugin.names import dra_names
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
