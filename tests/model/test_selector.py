"""Which GPUs a pod's model and UUID annotations allow, with HAMi's rules (its CheckType and CheckUUID
cases, pkg/device/devices_test.go, as facts: comma lists, trimmed entries, blank entries and values
meaning no constraint, the avoid list winning; types matched as parts of the name in any case)."""

from __future__ import annotations

import pytest

from runtimekit.model import Gpu, GpuUUID, selector_from_annotations
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

HAMI = preset_protocol("hami")
A100 = Gpu(0, GpuUUID("abc"), "A100-80GB", 81920)  # NVML's product name: NVIDIA A100-SXM4-80GB
USE, NOUSE = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
USE_ID, NOUSE_ID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"


@pytest.mark.parametrize(
    ("annotations", "allowed"),
    [
        pytest.param({}, True, id="no-annotation"),
        pytest.param({USE: "A100,V100"}, True, id="use-list-part-of-the-name"),
        pytest.param({USE: "V100"}, False, id="use-list-misses"),
        pytest.param({NOUSE: "A100"}, False, id="nouse-matches"),
        pytest.param({NOUSE: "V100"}, True, id="nouse-misses"),
        pytest.param({USE: ""}, True, id="empty-use-is-no-constraint"),
        pytest.param({NOUSE: "   "}, True, id="blank-nouse-excludes-nothing"),
        pytest.param({USE: "A100", NOUSE: "A100"}, False, id="nouse-wins"),
        pytest.param({NOUSE: "V100,"}, True, id="trailing-comma-matches-nothing-more"),
        pytest.param({NOUSE: ",V100"}, True, id="leading-comma-matches-nothing-more"),
        pytest.param({USE: "V100,"}, False, id="use-with-trailing-comma"),
        pytest.param({USE: "sxm4"}, True, id="any-case-product-name"),
        pytest.param({USE: "NVIDIA"}, True, id="vendor-part"),
    ],
)
def test_card_types(annotations: dict[str, str], allowed: bool) -> None:
    selector = selector_from_annotations(annotations, HAMI)
    assert (selector is None or selector.allows(A100)) == allowed


T4 = Gpu(0, GpuUUID("t4"), "T4", 15360)  # NVML's product name: Tesla T4; HAMi's card type: NVIDIA-Tesla T4


@pytest.mark.parametrize(
    ("annotations", "gpu", "allowed"),
    [
        # HAMi's Test_checkType (pkg/device/nvidia/device_test.go), on its card types
        pytest.param({USE: "A10"}, Gpu(0, GpuUUID("a"), "NVIDIA A100", 81920), True, id="use-matches"),
        pytest.param({USE: "A10", NOUSE: "A100"}, Gpu(0, GpuUUID("a"), "NVIDIA A100", 81920), False, id="nouse-wins"),
        pytest.param({USE: "A10", NOUSE: "A100"}, Gpu(0, GpuUUID("a"), "NVIDIA A10", 23028), True, id="a10-not-a100"),
        # the prefix HAMi's device plugin puts before a name without NVIDIA
        pytest.param({USE: "NVIDIA-Tesla"}, T4, True, id="hami-type-prefix"),
        pytest.param({USE: "nvidia-tesla t4"}, T4, True, id="hami-type-any-case"),
        pytest.param({NOUSE: "NVIDIA"}, T4, False, id="every-hami-type-is-nvidia"),
        pytest.param({USE: "NVIDIA-A100"}, A100, False, id="no-prefix-where-the-name-has-nvidia"),
        pytest.param(
            {USE: "NVIDIA-Tesla V100"}, Gpu(0, GpuUUID("v"), "Tesla V100-PCIE-16GB", 16384), True, id="unknown"
        ),
    ],
)
def test_hami_card_type_names(annotations: dict[str, str], gpu: Gpu, allowed: bool) -> None:
    selector = selector_from_annotations(annotations, HAMI)
    assert selector is not None
    assert selector.allows(gpu) == allowed


@pytest.mark.parametrize(
    ("annotations", "uuid", "allowed"),
    [
        pytest.param({USE_ID: "abc"}, "abc", True, id="use-matches"),
        pytest.param({USE_ID: "abc"}, "1abc", False, id="use-is-exact"),
        pytest.param({NOUSE_ID: "abc"}, "abc", False, id="nouse-matches"),
        pytest.param({NOUSE_ID: "abc"}, "1abc", True, id="nouse-misses"),
        pytest.param({USE_ID: "abc,def", NOUSE_ID: "abc"}, "abc", False, id="in-both-nouse-wins"),
        pytest.param({USE_ID: "abc,def", NOUSE_ID: "def"}, "abc", True, id="in-use-not-in-nouse"),
        pytest.param({USE_ID: " abc , def "}, "abc", True, id="trimmed"),
        pytest.param({USE_ID: ""}, "abc", True, id="empty-use"),
        pytest.param({USE_ID: "  "}, "abc", True, id="blank-use"),
        pytest.param({NOUSE_ID: ""}, "abc", True, id="empty-nouse"),
    ],
)
def test_uuids(annotations: dict[str, str], uuid: str, allowed: bool) -> None:
    selector = selector_from_annotations(annotations, HAMI)
    gpu = Gpu(0, GpuUUID(uuid), "A100-80GB", 81920)
    assert (selector is None or selector.allows(gpu)) == allowed


def test_under_the_default_protocol_the_allowed_models_stay_exact_and_node_level() -> None:
    default = KitProtocol.default()
    assert selector_from_annotations({default.annotations.gpu_models: "A100"}, default) is None
    assert selector_from_annotations({USE: "V100"}, default) is None  # not a name this protocol reads


def test_reasons_name_the_annotations() -> None:
    selector = selector_from_annotations({USE: "V100", USE_ID: "x"}, HAMI)
    assert selector is not None
    assert selector.why_not(A100) == "model"
    assert selector.reason("model") == f"no GPU of the models asked for ({USE}, {NOUSE})"
    assert selector.reason("uuid") == f"no GPU with the UUIDs asked for ({USE_ID}, {NOUSE_ID})"
