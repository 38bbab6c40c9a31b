"""The exporter's metrics registry, built in one place for `runtimekit exporter` and for the
embedded cluster's per-node exporters: the runtime's metrics (`RuntimeCollector`), the health
detector's counters (`HealthCollector`), the peers' metric names the config or the protocol's preset
asks for (`runtimekit.exporter.compat`), and every extension collector the config names (one
that cannot be loaded is an `ExtensionError` naming it, before anything is served).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.exporter.compat import resolve_modes
from runtimekit.exporter.extensions import ExtensionContext, load_collectors
from runtimekit.exporter.health import HealthCollector, HealthDetector


def build_registry(context: ExtensionContext, detector: HealthDetector) -> CollectorRegistry:
    """A fresh registry with every collector of one node's exporter."""
    registry = CollectorRegistry()
    compat = resolve_modes(context.config.metrics_compat, context.protocol)
    registry.register(
        RuntimeCollector(
            context.client, context.protocol, context.node_name, context.config.max_container_series, compat=compat
        )
    )
    registry.register(HealthCollector(detector))
    for collector in load_collectors(context):
        registry.register(collector)
    return registry
