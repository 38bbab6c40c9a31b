"""Constants of kubelet's DRA plugin API and plugin registration API (k8s.io/kubelet/pkg/apis/dra,
pluginregistration/v1).

Shared by the DRA kubelet plugin (plugin side), the embedded cluster's simulated kubelet (kubelet
side) and the node runtime (which leaves the allocations of prepared claims to the plugin), which must
agree on them but may not import each other.
"""

from __future__ import annotations

from typing import Final

PLUGIN_TYPE: Final = "DRAPlugin"  # PluginInfo.type of a DRA driver (kubelet's pluginregistration.DRAPlugin)
V1_SERVICE: Final = "v1.DRAPlugin"  # supported_versions entry of the v1 service (kubelet 1.34 and later)
V1BETA1_SERVICE: Final = "v1beta1.DRAPlugin"  # ... of the v1beta1 service (kubelet 1.32 and later)
SUPPORTED_SERVICES: Final = (V1_SERVICE, V1BETA1_SERVICE)
PLUGINS_REGISTRY: Final = "/var/lib/kubelet/plugins_registry"  # kubelet's plugin watcher scans it
PLUGINS_DIR: Final = "/var/lib/kubelet/plugins"  # <dir>/<driver>/dra.sock: where a driver serves its service
DRA_SOCKET_NAME: Final = "dra.sock"
CDI_DIR: Final = "/var/run/cdi"  # where containerd and CRI-O read CDI specs by default

# The resource name the DRA plugin gives the runtime for a prepared claim's allocation (the claim stands
# for the pod, a request for the container). kubelet releases such an allocation through
# NodeUnprepareResources, so the runtime's reconciliation, which releases allocations of pods that are
# gone, leaves them alone: a claim is not a pod.
CLAIM_RESOURCE: Final = "claims.runtimekit.aliyun.com/resourceclaim"


def registration_socket_name(driver: str) -> str:
    """The plugin's socket in kubelet's plugin registry: `<driver>-reg.sock`, as kubelet's helper names it."""
    return f"{driver}-reg.sock"
