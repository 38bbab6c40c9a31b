"""Opaque per-claim config as NVIDIA's k8s-dra-driver-gpu accepts it (api/nvidia.com/resource/v1beta1:
GpuConfig, MigDeviceConfig, sharing TimeSlicing or MPS), read for what it means here."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.draplugin.config import ConfigError, Sharing, sharing_for
from runtimekit.kube.objects.dra import DeviceAllocationConfiguration

DRIVER = "gpu.runtimekit.aliyun.com"
API = "resource.nvidia.com/v1beta1"


def config(
    parameters: Any, requests: list[str] | None = None, source: str = "FromClaim", driver: str = DRIVER
) -> DeviceAllocationConfiguration:
    entry: DeviceAllocationConfiguration = {"source": source, "opaque": {"driver": driver, "parameters": parameters}}
    if requests is not None:
        entry["requests"] = requests
    return entry


def gpu(sharing: Any, kind: str = "GpuConfig") -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "sharing": sharing}


@pytest.mark.parametrize(
    ("parameters", "wanted"),
    [
        ({"apiVersion": API, "kind": "GpuConfig"}, Sharing()),
        (gpu({"strategy": "TimeSlicing"}), Sharing("TimeSlicing")),
        (gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}), Sharing("TimeSlicing")),
        (
            gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
            Sharing("TimeSlicing", notes=("time-slice interval Long is the GPU's setting: left as is",)),
        ),
        (gpu({"strategy": "MPS"}), Sharing("MPS")),
        (
            gpu(
                {
                    "strategy": "MPS",
                    "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"},
                }
            ),
            Sharing("MPS", 50, 10240),
        ),
        (
            gpu({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25}}, "MigDeviceConfig"),
            Sharing("MPS", 25),
        ),
    ],
    ids=["no-sharing", "ts", "ts-default", "ts-long", "mps", "mps-limits", "mig-mps"],
)
def test_accepted(parameters: Any, wanted: Sharing) -> None:
    assert sharing_for("gpu", [config(parameters)], DRIVER) == wanted


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig"},
            "unsupported opaque config",
        ),
        ({"apiVersion": "gpu.example.com/v1", "kind": "GpuConfig"}, "unsupported opaque config"),
        ("not an object", "must be an object"),
        (gpu({"strategy": "Exclusive"}), "strategy 'Exclusive': accepted are TimeSlicing, MPS"),
        (gpu({"strategy": "TimeSlicing", "mpsConfig": {}}), "cannot use mpsConfig with the 'TimeSlicing' strategy"),
        (gpu({"strategy": "MPS", "timeSlicingConfig": {}}), "cannot use timeSlicingConfig with the 'MPS' strategy"),
        (gpu({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}}), "interval 'Forever'"),
        (gpu({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 150}}), "a whole number from 0 to 100"),
        (gpu({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "lots"}}), "is not a quantity"),
        (gpu({"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"0": "1Gi"}}}), "not supported"),
        (gpu({"strategy": "MPS", "mpsConfig": {"threads": 1}}), "unknown field(s) in mpsConfig: threads"),
        ({**gpu({"strategy": "MPS"}), "isolation": "strict"}, "unknown field(s) in GpuConfig: isolation"),
        (gpu({"strategy": "TimeSlicing"}, "MigDeviceConfig"), "MigDeviceConfig accepts the 'MPS' strategy only"),
    ],
)
def test_refused_with_a_clear_message(parameters: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        sharing_for("gpu", [config(parameters)], DRIVER)
    assert message in str(caught.value)


def test_only_this_drivers_configs_for_this_request_count_and_claim_configs_win() -> None:
    ts, mps = gpu({"strategy": "TimeSlicing"}), gpu({"strategy": "MPS"})
    configs = [
        config(mps, ["other"]),
        config({"anything": True}, driver="gpu.nvidia.example"),
        config(mps),  # from the claim: after the class's, whatever the order given
        config(ts, source="FromClass"),
    ]
    assert sharing_for("gpu", configs, DRIVER).strategy == "MPS"
    assert sharing_for("gpu", configs[:2], DRIVER) == Sharing()
    assert sharing_for("other", [config(ts, ["other/sub"])], DRIVER).strategy == "TimeSlicing"
