"""The protocol presets carry the peers' own names and units (from their documentation and example
manifests: HAMi's examples/nvidia, Aliyun's gpushare samples, Volcano's vGPU guide and device plugin
examples, NVIDIA's device plugin README), and `runtimekit protocol preset` writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.protocol import PROTOCOL_VERSION, ProtocolError, load_protocol
from runtimekit.protocol.presets import PRESETS, preset_protocol, preset_text


@pytest.mark.parametrize(
    ("name", "facts"),
    [
        pytest.param(
            "hami",
            {
                "resources.gpu": "nvidia.com/gpu",
                "resources.core": "nvidia.com/gpucores",
                "resources.memory": "nvidia.com/gpumem",
                "resources.memoryPercent": "nvidia.com/gpumem-percentage",
                "resources.migPrefix": "nvidia.com/mig-",
                "memoryUnit": "1Mi",  # gpumem: 3000 is 3000 MiB
                "resources.gpuReplicas": "10",  # HAMi's deviceSplitCount
                "rules.memoryDefault": "whole",  # gpucores without gpumem: the card's whole memory
                "rules.modelMatch": "contains",  # use-gputype: A100 matches NVIDIA A100-SXM4-40GB
                "annotations.gpuModels": "nvidia.com/use-gputype",
                "annotations.gpuModelsExcluded": "nvidia.com/nouse-gputype",
                "annotations.gpuUuids": "nvidia.com/use-gpuuuid",
                "annotations.gpuUuidsExcluded": "nvidia.com/nouse-gpuuuid",
                "annotations.nodePolicy": "hami.io/node-scheduler-policy",
                "annotations.gpuPolicy": "hami.io/gpu-scheduler-policy",
                "schedulerAliases": "hami-scheduler",
            },
            id="hami",
        ),
        pytest.param(
            "gpushare",
            {"resources.memory": "aliyun.com/gpu-mem", "memoryUnit": "1Gi", "resources.gpu": "aliyun.com/gpu-count"},
            id="gpushare",
        ),
        pytest.param(
            "volcano-vgpu",
            {
                "resources.gpu": "volcano.sh/vgpu-number",
                "resources.core": "volcano.sh/vgpu-cores",
                "resources.memory": "volcano.sh/vgpu-memory",
                "resources.memoryPercent": "volcano.sh/vgpu-memory-percentage",
                "aliases.memory": "volcano.sh/gpu-memory",
                "aliases.gpu": "volcano.sh/gpu-number",
                "memoryUnit": "1Mi",
                "rules.memoryDefault": "whole",
                "annotations.gpuModels": "nvidia.com/use-gputype",
                "annotations.gpuUuids": "volcano.sh/vgpu-use-gpuuuid",
                "annotations.gpuUuidsExcluded": "volcano.sh/vgpu-nouse-gpuuuid",
                "schedulerAliases": "volcano",
            },
            id="volcano-vgpu",
        ),
        pytest.param(
            "nvidia",
            {"resources.gpu": "nvidia.com/gpu", "resources.migPrefix": "nvidia.com/mig-", "resources.gpuReplicas": "1"},
            id="nvidia",
        ),
    ],
)
def test_a_preset_carries_its_systems_names_and_units(name: str, facts: dict[str, str]) -> None:
    protocol = preset_protocol(name)
    assert {key: protocol.values[key] for key in facts} == facts
    assert protocol.version == PROTOCOL_VERSION


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_written_file_loads_as_the_preset(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "protocol.yaml"
    assert main(["protocol", "preset", name, "--output", str(target)]) == 0
    assert target.read_text() == preset_text(name)
    assert load_protocol(target) == preset_protocol(name)
    assert main(["protocol", "preset", name]) == 0
    assert capsys.readouterr().out == preset_text(name)
    assert main(["protocol", "check", str(target), str(target)]) == 0


def test_an_unknown_preset_is_refused_listing_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocol", "preset", "koordinator"]) == 2
    err = capsys.readouterr().err
    assert "unknown protocol preset 'koordinator'" in err
    for name in PRESETS:
        assert name in err
    with pytest.raises(ProtocolError):
        preset_protocol("koordinator")


def test_memory_counted_in_mib_is_kept_from_kubelet() -> None:
    """Advertising one device per MiB would list 143771 devices per H200 (Volcano's vGPU plugin warns
    past 60000 a node); HAMi advertises no gpumem resource at all and kubelet lets it through."""
    for name in PRESETS:
        protocol = preset_protocol(name)
        assert protocol.resources.memory_advertised == (protocol.memory_unit_mib >= 1024), name
