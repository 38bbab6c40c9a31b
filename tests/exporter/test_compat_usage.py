"""Peers' per-container families from the runtime's per-container readings (the simulated usage
model): dcgm-exporter's per-process mapping of DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED (the
device's reading, then each container's own use) and HAMi's container usage families, equal to the
kit's own runtimekit_container_* series of the same scrape."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import Node
from exporter.test_compat_dcgm import scrape
from exporter.test_metrics import allocate

MIB = 1024 * 1024


def found(node: Node, modes: tuple[str, ...]) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(scrape(node, modes))}


@pytest.fixture
def shared(usage_node: Node) -> Node:
    gpu = usage_node.client.list_devices()[0].uuid
    allocate(usage_node.client, "a", gpu, 300, 8192)
    allocate(usage_node.client, "b", gpu, 200, 4096)
    return usage_node


def test_dcgm_gives_each_container_its_own_use_beside_the_device(shared: Node) -> None:
    got = found(shared, ("dcgm",))
    kit_memory = {s.labels["pod"]: s.value for s in got["runtimekit_container_gpu_memory_used_bytes"]}
    kit_sm = {s.labels["pod"]: s.value for s in got["runtimekit_container_gpu_utilization_ratio"]}
    fb = {(s.labels["gpu"], s.labels["pod"]): s.value for s in got["DCGM_FI_DEV_FB_USED"]}
    assert set(fb) == {("0", ""), ("0", "a"), ("0", "b"), ("1", "")}
    assert fb["0", "a"] == kit_memory["a"] / MIB
    assert fb["0", "a"] == pytest.approx(0.7 * 8192, abs=1)  # the usage model's default: 70 % of the grant
    device = next(s.value for s in got["runtimekit_gpu_memory_used_bytes"] if s.labels["gpu"] == "0")
    assert fb["0", ""] == device / MIB  # the device reading stays, with empty pod labels
    util = {(s.labels["gpu"], s.labels["pod"]): s.value for s in got["DCGM_FI_DEV_GPU_UTIL"]}
    assert util["0", "b"] == pytest.approx(kit_sm["b"] * 100)
    assert util["0", "b"] == pytest.approx(0.6 * 20)  # 60 % of a 20 % share
    # the other families stay one copy of the device reading per container, as dcgm-exporter makes them
    temps = {(s.labels["gpu"], s.labels["pod"]) for s in got["DCGM_FI_DEV_GPU_TEMP"]}
    assert temps == {("0", "a"), ("0", "b"), ("1", "")}


def test_hami_container_usage_families(shared: Node) -> None:
    got = found(shared, ("hami",))
    kit_memory = {s.labels["pod"]: s.value for s in got["runtimekit_container_gpu_memory_used_bytes"]}
    kit_sm = {s.labels["pod"]: s.value for s in got["runtimekit_container_gpu_utilization_ratio"]}
    used = {s.labels["pod"]: s for s in got["hami_vgpu_memory_used_bytes"]}
    assert {pod: s.value for pod, s in used.items()} == kit_memory
    assert used["a"].labels == {
        "namespace": "default",
        "pod": "a",
        "container": "main",
        "vdevice_index": "0",
        "device_uuid": shared.client.list_devices()[0].uuid,
    }
    assert {s.labels["pod"]: s.value for s in got["hami_container_device_memory_bytes"]} == kit_memory
    util = {s.labels["pod"]: s.value for s in got["hami_container_device_utilization_ratio"]}
    assert util == pytest.approx({pod: ratio * 100 for pod, ratio in kit_sm.items()})  # HAMi's percent
    legacy = {s.labels["podname"]: s for s in got["vGPU_device_memory_usage_in_bytes"]}
    assert {pod: s.value for pod, s in legacy.items()} == kit_memory
    (desc,) = [s for s in got["Device_memory_desc_of_container"] if s.labels["podname"] == "a"]
    assert desc.value == kit_memory["a"]
    # no split of the memory is known: the labels stay empty (Prometheus drops empty labels)
    assert [desc.labels[k] for k in ("context", "module", "data", "offset")] == ["", "", "", ""]
    assert {s.labels["podname"] for s in got["Device_utilization_desc_of_container"]} == {"a", "b"}


def test_without_per_container_readings_the_usage_families_are_left_out(node: Node) -> None:
    allocate(node.client, "a", node.client.list_devices()[0].uuid, 300, 8192)
    got = found(node, ("hami", "dcgm"))
    assert "hami_vgpu_memory_used_bytes" not in got
    assert "Device_utilization_desc_of_container" not in got
    assert {s.labels["pod"] for s in got["DCGM_FI_DEV_FB_USED"]} == {"a", ""}  # device copies only
    assert "hami_vgpu_memory_limit_bytes" in got
