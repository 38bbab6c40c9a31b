"""Constants of the kubelet device plugin API v1beta1 and the PodResources API v1 (protocols.md §1.4, §2).

Shared by the device plugin (plugin side) and the embedded cluster's simulated kubelet (kubelet
side), which must agree on them but may not import each other.
"""

from __future__ import annotations

from typing import Final

VERSION: Final = "v1beta1"
SUPPORTED_VERSIONS: Final = ("v1beta1",)
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
KUBELET_SOCKET_NAME: Final = "kubelet.sock"
CHECKPOINT_NAME: Final = "kubelet_internal_checkpoint"
POD_RESOURCES_SOCKET: Final = "/var/lib/kubelet/pod-resources/kubelet.sock"
PRE_START_TIMEOUT_S: Final = 30.0


def unix_target(path: str) -> str:
    """The gRPC target of a unix socket path (absolute or relative)."""
    return f"unix://{path}" if path.startswith("/") else f"unix:{path}"
