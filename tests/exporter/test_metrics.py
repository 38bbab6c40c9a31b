"""What the exporter exposes: names and values from a real runtime, promtool-clean text, a scrape
that survives a dead runtime and malformed data, and custom collectors."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import ROOT, Exporter, Node, tool
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.exporter.config import ConfigError, ExporterConfig, load_config
from runtimekit.exporter.extensions import ExtensionContext, ExtensionError, load_collectors
from runtimekit.exporter.sample import read_sample
from runtimekit.protocol import KitProtocol


def samples(text: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def allocate(client: RuntimeClient, pod: str, uuid: str, core: int, memory: int) -> None:
    client.allocate("default", pod, f"uid-{pod}", "main", [pb.GpuShare(uuid=uuid, core_milli=core, memory_mib=memory)])


def test_gpu_allocation_and_node_metrics(node: Node, exporter: Exporter) -> None:
    gpus = node.client.list_devices()
    allocate(node.client, "a", gpus[0].uuid, 300, 8192)
    allocate(node.client, "b", gpus[0].uuid, 200, 4096)
    text = httpx2.get(f"{exporter.url}/metrics").text
    found = samples(text)
    assert found["runtimekit_runtime_up"][0].value == 1
    util = {s.labels["gpu"]: s for s in found["runtimekit_gpu_utilization_ratio"]}
    assert set(util) == {"0", "1"}
    assert util["0"].labels == {"node": "node-a", "gpu": "0", "uuid": gpus[0].uuid, "model": "H200"}
    assert 0 <= util["0"].value <= 1
    total = {s.labels["gpu"]: s.value for s in found["runtimekit_gpu_memory_total_bytes"]}
    assert total["0"] == 143771 * 1024 * 1024
    shares = {s.labels["pod"]: s.value for s in found["runtimekit_allocation_core_ratio"]}
    assert shares == {"a": 0.3, "b": 0.2}
    limits = {s.labels["pod"]: s.value for s in found["runtimekit_allocation_memory_limit_bytes"]}
    assert limits == {"a": 8192 * 2**20, "b": 4096 * 2**20}
    assert found["runtimekit_node_gpu_core_allocated"][0].value == pytest.approx(0.5)
    assert found["runtimekit_node_gpu_core_capacity"][0].value == 2
    assert {s.labels["gpu"]: s.value for s in found["runtimekit_gpu_core_allocated_ratio"]} == {"0": 0.5, "1": 0.0}
    info = found["runtimekit_runtime_info"][0].labels
    assert info["backend"] == "simulated"
    assert info["protocol_fingerprint"] == KitProtocol.default().fingerprint
    assert found["runtimekit_exporter_info"][0].labels["protocol_fingerprint"] == KitProtocol.default().fingerprint
    assert found["runtimekit_exporter_scrape_duration_seconds"][0].value > 0
    assert httpx2.get(f"{exporter.url}/healthz").text == "ok\n"


def test_promtool_finds_nothing_to_lint(node: Node, exporter: Exporter) -> None:
    promtool = tool("promtool")
    allocate(node.client, "a", node.client.list_devices()[0].uuid, 300, 8192)
    text = httpx2.get(f"{exporter.url}/metrics").text
    done = subprocess.run([str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_dead_runtime_still_gets_a_scrape(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    client = RuntimeClient(str(tmp_path / "nobody.sock"), timeout_s=0.3)
    registry.register(RuntimeCollector(client, KitProtocol.default()))
    found = samples(generate_latest(registry).decode())
    assert found["runtimekit_runtime_up"][0].value == 0
    assert "runtimekit_gpu_utilization_ratio" not in found
    client.close()


class FakeClient:
    """Answers ExporterGetDataList with whatever the test puts in it."""

    def __init__(self, msg: pb.ExporterGetDataListResponse) -> None:
        self.msg = msg

    def exporter_data(self) -> pb.ExporterGetDataListResponse:
        return self.msg


def test_bad_data_never_breaks_a_scrape() -> None:
    nan = float("nan")
    msg = pb.ExporterGetDataListResponse(
        node_name="n",
        gpus=[
            pb.GpuSample(
                index=0,
                uuid="GPU-a",
                model="T4",
                utilization_percent=nan,
                temperature_celsius=-5,
                memory_used_mib=10,
                memory_total_mib=0,
                power_watts=float("inf"),
            ),
            pb.GpuSample(index=1),  # no UUID: left out
            pb.GpuSample(index=2, uuid="GPU-a"),  # duplicate: left out
        ],
        allocations=[
            pb.AllocationSample(
                namespace="d", pod="p", container="c", gpu_uuid="GPU-zz", core_milli=5000, memory_mib=1
            ),
            pb.AllocationSample(pod="q", gpu_uuid="GPU-a", core_milli=-1),  # negative: left out
            pb.AllocationSample(),  # empty: left out
        ],
    )
    sample = read_sample(FakeClient(msg))  # type: ignore[arg-type]
    assert [g.uuid for g in sample.gpus] == ["GPU-a"]
    gpu = sample.gpus[0]
    assert (gpu.utilization, gpu.temperature_celsius, gpu.memory_total_bytes, gpu.power_watts) == (None,) * 4
    assert gpu.healthy is None
    (alloc,) = sample.allocations
    assert (alloc.gpu_index, alloc.core_ratio) == ("", 1.0)  # unknown GPU kept, share capped
    assert sample.dropped == 4
    registry = CollectorRegistry()

    class Wrapped(RuntimeCollector):
        pass

    collector = Wrapped(FakeClient(msg), KitProtocol.default())  # type: ignore[arg-type]
    collector._runtime_info = lambda s: iter(())  # type: ignore[method-assign]
    registry.register(collector)
    found = samples(generate_latest(registry).decode())
    assert found["runtimekit_runtime_up"][0].value == 1
    assert "runtimekit_gpu_utilization_ratio" not in found  # NaN is not exposed
    assert found["runtimekit_runtime_malformed_readings"][0].value == 4


def test_config_file_and_custom_collectors(node: Node, tmp_path: Path) -> None:
    config = load_config(ROOT / "etc" / "exporter.yaml")
    assert config == ExporterConfig()  # the template documents the defaults
    custom = tmp_path / "c.yaml"
    custom.write_text(
        f"collectors: ['{ROOT}/examples/exporter/allocation_age.py:factory']\nhealth: {{recoverySeconds: 5}}\n"
    )
    config = load_config(custom)
    assert config.health.recovery_seconds == 5.0
    allocate(node.client, "aged", node.client.list_devices()[1].uuid, 100, 0)
    registry = CollectorRegistry()
    for collector in load_collectors(ExtensionContext(node.client, KitProtocol.default(), config, "node-a")):
        registry.register(collector)
    found = samples(generate_latest(registry).decode())
    (age,) = found["runtimekit_allocation_age_seconds"]
    assert age.labels["pod"] == "aged"
    assert age.value >= 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("health: {temperatureCelsius: hot}\n")
    with pytest.raises(ConfigError, match="temperatureCelsius must be a non-negative number"):
        load_config(bad)
    bad.write_text("scrapeTimeout: 1\n")
    with pytest.raises(ConfigError, match="unknown key 'scrapeTimeout'"):
        load_config(bad)
    with pytest.raises(ExtensionError, match="no entry point"):
        load_collectors(ExtensionContext(node.client, KitProtocol.default(), ExporterConfig(collectors=("nope",)), "n"))
