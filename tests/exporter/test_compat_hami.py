"""HAMi's names (`--metrics-compat hami`): its vGPU monitor's and its scheduler's families
(Project-HAMi/HAMi cmd/vGPUmonitor/metrics.go, cmd/scheduler/metrics.go, as facts), current and legacy,
with their labels and units, from a runtime on simulated GPUs with two containers sharing a GPU."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import Node
from exporter.test_compat_dcgm import scrape
from exporter.test_metrics import allocate
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb

GIB = 1024**3


def families(node: Node) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(scrape(node, ("hami",)))}


def by(found: list[Any], label: str) -> dict[str, Any]:
    return {s.labels[label]: s for s in found}


def test_scheduler_families_say_what_is_granted_on_each_gpu(node: Node) -> None:
    gpus = node.client.list_devices()
    allocate(node.client, "a", gpus[0].uuid, 300, 8192)
    allocate(node.client, "b", gpus[0].uuid, 200, 4096)
    found = families(node)
    limit = by(found["hami_gpu_memory_limit_bytes"], "device_index")
    assert limit["0"].labels == {
        "node": "node-a",
        "device_uuid": gpus[0].uuid,
        "device_index": "0",
        "device_type": "NVIDIA H200",
        "zone": "vGPU",
    }
    assert limit["0"].value == gpus[0].memory_mib * 1024 * 1024
    assert by(found["hami_gpu_memory_allocated_bytes"], "device_index")["0"].value == 12 * GIB
    assert by(found["hami_gpu_memory_allocated_bytes"], "device_index")["0"].labels["device_cores"] == "100"
    assert {k: s.value for k, s in by(found["hami_gpu_shared_count"], "device_index").items()} == {"0": 2, "1": 0}
    # HAMi's core figures are percent of a card, whatever the `_ratio` in the name says
    assert by(found["hami_gpu_core_allocated_ratio"], "device_index")["0"].value == 50
    assert by(found["hami_gpu_core_limit_ratio"], "device_index")["0"].value == 100
    assert (
        by(found["hami_node_gpu_memory_allocated_ratio"], "device_index")["0"].value == 12 * 1024 / gpus[0].memory_mib
    )
    overview = by(found["hami_node_gpu_overview"], "device_index")["0"]
    assert (overview.labels["device_memory_limit"], overview.value) == (str(gpus[0].memory_mib), 12 * GIB)
    # the legacy names (HAMi's --legacy-metrics) carry the same values under HAMi's older labels
    legacy = by(found["GPUDeviceSharedNum"], "deviceidx")["0"]
    assert legacy.labels == {
        "nodeid": "node-a",
        "deviceuuid": gpus[0].uuid,
        "deviceidx": "0",
        "devicetype": "NVIDIA H200",
        "zone": "vGPU",
    }
    assert legacy.value == 2
    assert by(found["GPUDeviceMemoryLimit"], "deviceidx")["0"].value == limit["0"].value
    assert by(found["nodeGPUOverview"], "deviceidx")["0"].value == 12 * GIB


def test_monitor_families_read_the_gpus_and_the_containers_limits(node: Node) -> None:
    gpus = node.client.list_devices()
    allocate(node.client, "a", gpus[1].uuid, 300, 8192)
    node.client.allocate(
        "ml",
        "two",
        "uid-two",
        "train",
        [
            _share(gpus[1].uuid, 100, 1024),
            _share(gpus[0].uuid, 100, 2048),
        ],
    )
    found = families(node)
    used = by(found["hami_host_gpu_memory_used_bytes"], "device_index")
    assert set(used["0"].labels) == {"node", "device_index", "device_uuid", "device_type"}
    assert used["1"].value > 0
    assert by(found["HostGPUMemoryUsage"], "deviceidx")["1"].value == used["1"].value
    util = by(found["hami_host_gpu_utilization_ratio"], "device_index")
    assert 0 <= util["1"].value <= 100
    assert by(found["HostCoreUtilization"], "deviceidx")["1"].value == util["1"].value
    assert set(by(found["hami_host_gpu_memory_controller_utilization_ratio"], "device_index")) == {"0", "1"}
    limits = {
        (s.labels["pod"], s.labels["vdevice_index"]): (s.labels["device_uuid"], s.value)
        for s in found["hami_vgpu_memory_limit_bytes"]
    }
    # a container's devices are numbered 0, 1, ... as HAMi's vdevice_index: here in the node's GPU order
    assert limits == {
        ("a", "0"): (gpus[1].uuid, 8 * GIB),
        ("two", "0"): (gpus[0].uuid, 2 * GIB),
        ("two", "1"): (gpus[1].uuid, 1 * GIB),
    }
    legacy = {
        s.labels["vdeviceid"]: s for s in found["vGPU_device_memory_limit_in_bytes"] if s.labels["podname"] == "two"
    }
    assert legacy["1"].labels == {
        "podnamespace": "ml",
        "podname": "two",
        "ctrname": "train",
        "vdeviceid": "1",
        "deviceuuid": gpus[1].uuid,
    }


def _share(uuid: str, core: int, memory: int) -> pb.GpuShare:
    return pb.GpuShare(uuid=uuid, core_milli=core, memory_mib=memory)


def test_off_unless_asked(node: Node) -> None:
    text = scrape(node, ("dcgm",))
    assert "hami_" not in text
    assert "HostGPUMemoryUsage" not in text
