"""The embedded cluster's per-node exporter serves what `runtimekit exporter` serves, extension
collectors from its config included (it used to skip them)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.cli.node_exporter import start_node_exporter
from runtimekit.exporter.config import ExporterConfig, HealthConfig
from runtimekit.exporter.extensions import ExtensionError
from runtimekit.protocol.presets import preset_protocol
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Node:
    name: str
    runtime_socket: str | None


@pytest.fixture
def node() -> Iterator[Node]:
    folder = Path(tempfile.mkdtemp(prefix="rkx-"))
    options = RuntimeOptions("simulated", str(folder / "rt.sock"), folder / "state", "node-a", simulate_gpus="2xT4")
    daemon = RuntimeDaemon(build_runtime(options), options.socket_path, 0).start()
    yield Node("node-a", options.socket_path)
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def metric_names(url: str) -> set[str]:
    text = httpx2.get(url, timeout=10).text
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def test_the_node_exporter_serves_the_configs_extension_collectors(node: Node) -> None:
    config = ExporterConfig(
        collectors=(f"{ROOT}/examples/exporter/allocation_age.py:factory",), health=HealthConfig(enabled=False)
    )
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as client:
        gpu = client.list_devices()[0].uuid
        client.allocate("default", "p", "uid-p", "main", [pb.GpuShare(uuid=gpu, core_milli=100, memory_mib=0)])
    exporter = start_node_exporter(node, config=config)
    assert exporter is not None
    try:
        names = metric_names(exporter.url)
    finally:
        exporter.stop()
    assert "runtimekit_allocation_age_seconds" in names
    assert "runtimekit_runtime_up" in names


def test_a_bad_collector_is_an_error_and_a_node_without_runtime_has_no_exporter(node: Node) -> None:
    with pytest.raises(ExtensionError, match="nope"):
        start_node_exporter(node, config=ExporterConfig(collectors=("nope",)))
    assert start_node_exporter(Node("direct", None)) is None


@pytest.mark.parametrize(
    ("preset", "peer", "other"),
    [("nvidia", "DCGM_FI_DEV_GPU_TEMP", "hami_"), ("hami", "hami_gpu_shared_count", "DCGM_")],
)
def test_a_presets_cluster_serves_its_peers_names(node: Node, preset: str, peer: str, other: str) -> None:
    exporter = start_node_exporter(node, preset_protocol(preset), ExporterConfig(health=HealthConfig(enabled=False)))
    assert exporter is not None
    try:
        names = metric_names(exporter.url)
    finally:
        exporter.stop()
    assert peer in names
    assert "runtimekit_runtime_up" in names
    assert not any(name.startswith(other) for name in names)
