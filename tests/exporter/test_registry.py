"""The exporter's one registry: the runtime's metrics, the health counters (a real prometheus
Collector) and the config's extension collectors, all in what a scrape returns."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import Collector

from exporter.conftest import ROOT, Node
from exporter.test_metrics import allocate, samples
from runtimekit.exporter.config import ExporterConfig, HealthConfig
from runtimekit.exporter.extensions import ExtensionContext, ExtensionError
from runtimekit.exporter.health import HealthCollector, HealthDetector
from runtimekit.exporter.registry import build_registry
from runtimekit.protocol import KitProtocol

EXTENSION = f"{ROOT}/examples/exporter/allocation_age.py:factory"


def test_one_registry_holds_runtime_health_and_extension_metrics(node: Node) -> None:
    config = ExporterConfig(collectors=(EXTENSION,), health=HealthConfig(temperature_celsius=0))
    detector = HealthDetector(node.client, config.health, "node-a")
    registry = build_registry(ExtensionContext(node.client, KitProtocol.default(), config, "node-a"), detector)
    allocate(node.client, "aged", node.client.list_devices()[0].uuid, 100, 0)
    detector.check_once()  # every GPU is "too hot" at 0 C: the detector marks them, and counts it
    found = samples(generate_latest(registry).decode())
    assert found["runtimekit_runtime_up"][0].value == 1
    assert found["runtimekit_allocation_age_seconds"][0].labels["pod"] == "aged"
    changes = {(c.labels["kind"], c.labels["healthy"]): c.value for c in found["runtimekit_gpu_health_changes_total"]}
    assert changes.pop(("temperature", "false")) == len(node.client.list_devices())
    assert set(changes.values()) == {0}  # the other kinds and directions, at 0


def test_the_health_counters_start_at_zero_for_every_kind(node: Node) -> None:
    """Before any change: a series per kind and direction at 0, so increase() sees the first change."""
    detector = HealthDetector(node.client, HealthConfig(), "node-a")
    found = samples(
        generate_latest(
            build_registry(ExtensionContext(node.client, KitProtocol.default(), ExporterConfig(), "node-a"), detector)
        ).decode()
    )
    changes = {(c.labels["kind"], c.labels["healthy"]): c.value for c in found["runtimekit_gpu_health_changes_total"]}
    assert changes == {(k, h): 0 for k in ("xid", "ecc", "temperature") for h in ("true", "false")}


def test_the_health_counters_are_a_prometheus_collector() -> None:
    assert Collector in HealthCollector.__mro__  # declared, so mypy checks it against prometheus' interface


def test_a_collector_that_cannot_load_stops_the_build(node: Node) -> None:
    config = ExporterConfig(collectors=("no-such-collector",))
    with pytest.raises(ExtensionError, match="no-such-collector"):
        build_registry(
            ExtensionContext(node.client, KitProtocol.default(), config, "n"),
            HealthDetector(node.client, config.health),
        )
