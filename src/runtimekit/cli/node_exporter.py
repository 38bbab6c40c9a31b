"""The exporter of one embedded-cluster node, in process: the same registry (`build_registry`: the
runtime's metrics, the health counters and the config's extension collectors) and health detector
as `runtimekit exporter`, serving /metrics on a free local port. `runtimekit up` plugs it in
through `ClusterOptions.exporter`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.exporter.config import ExporterConfig
from runtimekit.exporter.extensions import ExtensionContext
from runtimekit.exporter.health import HealthDetector
from runtimekit.exporter.registry import build_registry
from runtimekit.exporter.server import MetricsServer
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.loader import Sockets


class ExportedNode(Protocol):
    """What the exporter needs of a node (`embedded_nodes.SimulatedNode` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def runtime_socket(self) -> str | None:
        """None when the node has no runtime (direct mode)."""
        ...


@dataclass
class NodeExporter:
    url: str
    server: MetricsServer
    detector: HealthDetector
    client: RuntimeClient

    def stop(self) -> None:
        self.detector.stop()
        self.server.stop()
        self.client.close()


def start_node_exporter(
    node: ExportedNode, protocol: KitProtocol | None = None, config: ExporterConfig | None = None
) -> NodeExporter | None:
    """An exporter for a node with a runtime (None in direct mode, where there is none), under the
    cluster's protocol (whose preset may turn on peers' metric names: `exporter.compat`). Raises
    ExtensionError when a collector the config names cannot be loaded."""
    if node.runtime_socket is None:
        return None
    config = config or ExporterConfig()
    socket = Sockets(runtime=node.runtime_socket).exporter  # the runtime's exporter socket, not its full API
    client = RuntimeClient(socket, timeout_s=config.runtime_timeout_seconds)
    detector = HealthDetector(client, config.health, node.name)
    try:
        context = ExtensionContext(client, protocol or KitProtocol.default(), config, node.name)
        server = MetricsServer(build_registry(context, detector), "127.0.0.1", 0).start()
    except BaseException:
        client.close()
        raise
    if config.health.enabled:
        detector.start()
    return NodeExporter(f"http://{server.address}/metrics", server, detector, client)
