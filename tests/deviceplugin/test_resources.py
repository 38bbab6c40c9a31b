"""What the plugin advertises per resource: counts, IDs, health, MIG resources, socket names."""

from __future__ import annotations

import pytest
from dp_helpers import PROTOCOL, RES

from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.deviceplugin.resources import (
    ResourceKind,
    ResourceSpec,
    advertised,
    by_gpu,
    gpu_of,
    resource_specs,
    socket_name,
)
from runtimekit.protocol.presets import preset_protocol

DEVICES = [
    pb.Device(index=0, uuid="GPU-a", memory_mib=15360, health=pb.HEALTH_HEALTHY, mig_mode=pb.MIG_MODE_OFF, numa_node=0),
    pb.Device(index=1, uuid="GPU-b", memory_mib=16384, health=pb.HEALTH_UNHEALTHY, mig_mode=pb.MIG_MODE_OFF),
    pb.Device(
        index=2,
        uuid="GPU-m",
        memory_mib=81920,
        health=pb.HEALTH_HEALTHY,
        mig_mode=pb.MIG_MODE_STATIC,
        mig_devices=[
            pb.MigDevice(uuid="MIG-1", profile="3g.40gb", health=pb.HEALTH_HEALTHY),
            pb.MigDevice(uuid="MIG-2", profile="3g.40gb", health=pb.HEALTH_UNHEALTHY),
            pb.MigDevice(uuid="MIG-3", profile="1g.10gb", health=pb.HEALTH_HEALTHY),
        ],
    ),
]


def test_specs_include_one_resource_per_mig_profile() -> None:
    assert [(s.name, s.kind, s.mig_profile) for s in resource_specs(DEVICES, PROTOCOL)] == [
        (RES.gpu, ResourceKind.GPU, ""),
        (RES.core, ResourceKind.CORE, ""),
        (RES.memory, ResourceKind.MEMORY, ""),
        (RES.mig_prefix + "1g.10gb", ResourceKind.MIG, "1g.10gb"),
        (RES.mig_prefix + "3g.40gb", ResourceKind.MIG, "3g.40gb"),
    ]
    assert len(resource_specs(DEVICES[:2], PROTOCOL)) == 3


@pytest.mark.parametrize(
    ("spec", "unit", "count", "healthy", "first"),
    [
        pytest.param(ResourceSpec(RES.gpu, ResourceKind.GPU), 1024, 2, 1, "GPU-a", id="gpu-one-per-gpu"),
        pytest.param(ResourceSpec(RES.core, ResourceKind.CORE), 1024, 200, 100, "GPU-a::0", id="core-100-per-gpu"),
        pytest.param(ResourceSpec(RES.memory, ResourceKind.MEMORY), 1024, 31, 15, "GPU-a::0", id="memory-1gi"),
        pytest.param(ResourceSpec(RES.memory, ResourceKind.MEMORY), 256, 124, 60, "GPU-a::0", id="memory-256mi"),
        pytest.param(ResourceSpec("x/mig-3g.40gb", ResourceKind.MIG, "3g.40gb"), 1024, 2, 1, "MIG-1", id="mig"),
    ],
)
def test_advertised(spec: ResourceSpec, unit: int, count: int, healthy: int, first: str) -> None:
    devices = advertised(spec, DEVICES, unit)
    assert len(devices) == count
    assert sum(d.healthy for d in devices) == healthy
    assert devices[0].id == first
    assert len({d.id for d in devices}) == count
    assert all(len(d.id) <= 63 for d in devices)


def test_ids_are_stable_and_map_back_to_their_gpu() -> None:
    core = ResourceSpec(RES.core, ResourceKind.CORE)
    assert advertised(core, DEVICES, 1024) == advertised(core, list(DEVICES), 1024)
    ids = [d.id for d in advertised(core, DEVICES, 1024)]
    assert ids[99:101] == ["GPU-a::99", "GPU-b::0"]
    assert {gpu_of(i) for i in ids} == {"GPU-a", "GPU-b"}
    assert gpu_of("MIG-1") == "MIG-1"
    assert list(by_gpu(["GPU-a::1", "GPU-b::0", "GPU-a::0"])) == ["GPU-a", "GPU-b"]
    assert advertised(core, DEVICES, 1024)[0].numa_node == 0


def test_socket_names() -> None:
    assert socket_name("aliyun.com/gpu-core.percentage") == "lj-runtimekit-aliyun.com_gpu-core.percentage.sock"
    assert len({socket_name(s.name) for s in resource_specs(DEVICES, PROTOCOL)}) == 5


@pytest.mark.parametrize(
    ("preset", "registered"),
    [
        pytest.param(
            "hami",
            [
                ("nvidia.com/gpu", ResourceKind.GPU, 10),
                ("nvidia.com/gpucores", ResourceKind.CORE, 1),
                ("nvidia.com/gpumem-percentage", ResourceKind.MEMORY_PERCENT, 1),
                ("nvidia.com/mig-1g.10gb", ResourceKind.MIG, 1),
                ("nvidia.com/mig-3g.40gb", ResourceKind.MIG, 1),
            ],
            id="hami-no-gpumem",
        ),
        pytest.param(
            "volcano-vgpu",
            [
                ("volcano.sh/vgpu-number", ResourceKind.GPU, 10),
                ("volcano.sh/gpu-number", ResourceKind.GPU, 10),
                ("volcano.sh/vgpu-cores", ResourceKind.CORE, 1),
                ("volcano.sh/vgpu-memory-percentage", ResourceKind.MEMORY_PERCENT, 1),
                ("nvidia.com/mig-1g.10gb", ResourceKind.MIG, 1),
                ("nvidia.com/mig-3g.40gb", ResourceKind.MIG, 1),
            ],
            id="volcano-aliases-too",
        ),
        pytest.param(
            "gpushare",
            [
                ("aliyun.com/gpu-count", ResourceKind.GPU, 1),
                ("aliyun.com/gpu-core.percentage", ResourceKind.CORE, 1),
                ("aliyun.com/gpu-mem", ResourceKind.MEMORY, 1),
                ("aliyun.com/mig-1g.10gb", ResourceKind.MIG, 1),
                ("aliyun.com/mig-3g.40gb", ResourceKind.MIG, 1),
            ],
            id="gpushare-gib",
        ),
    ],
)
def test_a_preset_registers_every_name_kubelet_must_allocate(
    preset: str, registered: list[tuple[str, ResourceKind, int]]
) -> None:
    specs = resource_specs(DEVICES, preset_protocol(preset))
    assert [(s.name, s.kind, s.replicas) for s in specs] == registered


def test_gpu_replicas_and_memory_percent_devices() -> None:
    """HAMi's node offers each card 10 times over (deviceSplitCount), so ten shares asking for
    nvidia.com/gpu: 1 can sit on one card; percent devices are one per percent, as cores."""
    replicated = advertised(ResourceSpec("nvidia.com/gpu", ResourceKind.GPU, replicas=10), DEVICES, 1)
    assert len(replicated) == 20
    assert {gpu_of(d.id) for d in replicated} == {"GPU-a", "GPU-b"}
    assert replicated[0].id == "GPU-a::0"
    percent = advertised(ResourceSpec("x.io/pct", ResourceKind.MEMORY_PERCENT), DEVICES, 1)
    assert len(percent) == 200
    assert sum(d.healthy for d in percent) == 100
