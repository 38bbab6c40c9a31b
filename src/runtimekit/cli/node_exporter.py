"""The exporter of one embedded-cluster node, in process: the same collectors and health detector
as `runtimekit exporter`, serving /metrics on a free local port. `runtimekit up` plugs it in
through `ClusterOptions.exporter`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.exporter.config import ExporterConfig
from runtimekit.exporter.health import HealthCollector, HealthDetector
from runtimekit.exporter.server import MetricsServer
from runtimekit.protocol import Protocol

if TYPE_CHECKING:
    from runtimekit.cli.embedded_nodes import SimulatedNode


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
    node: SimulatedNode, config: ExporterConfig | None = None, protocol: Protocol | None = None
) -> NodeExporter | None:
    """An exporter for a node with a runtime (None in direct mode, where there is none)."""
    if node.runtime_socket is None:
        return None
    config = config or ExporterConfig()
    client = RuntimeClient(node.runtime_socket, timeout_s=config.runtime_timeout_seconds)
    registry = CollectorRegistry()
    registry.register(RuntimeCollector(client, protocol or Protocol.default(), node.name))
    detector = HealthDetector(client, config.health, node.name)
    registry.register(HealthCollector(detector))  # type: ignore[arg-type]
    server = MetricsServer(registry, "127.0.0.1", 0).start()
    if config.health.enabled:
        detector.start()
    return NodeExporter(f"http://{server.address}/metrics", server, detector, client)
