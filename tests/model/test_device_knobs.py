"""HAMi's device-plugin knobs as protocol rules (`rules.defaultMemory`, `rules.defaultCores`,
`rules.memoryScaling`): what a request that names no memory or compute gets, and what a GPU offers.

The request cases are HAMi's `TestGenerateResourceRequests_DefaultMemory` (pkg/device/nvidia/
device_test.go: `defaultMemory: 512` gives `nvidia.com/gpu: 1` alone 512 MiB, and so do a
`gpumem-percentage` or a `gpumem` of 0) and its reading of `defaultCores` (the cores of a container
that names none; one that names 0 keeps 0). The memory cases are its device plugin's registration
(register.go: the card's MiB times `deviceMemoryScaling`, rounded down, not in MIG mode).
"""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.model import GpuKind, GpuRequest, MigMode, NodeInventory
from runtimekit.model.gpu import offered_inventory, offered_memory_mib
from runtimekit.model.request import parse_container_gpu
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.loader import ProtocolError, parse_protocol_mapping
from runtimekit.protocol.presets import PRESETS, preset_protocol, speaks_hami

HAMI = preset_protocol("hami")


def hami_with(**rules: Any) -> KitProtocol:
    return parse_protocol_mapping({**PRESETS["hami"].keys, **{f"rules.{k}": v for k, v in rules.items()}}, "test")


def gpu(protocol: KitProtocol, **limits: str) -> GpuRequest | None:
    amounts = {f"nvidia.com/{k}": v for k, v in limits.items()}
    return parse_container_gpu({"name": "c", "resources": {"limits": amounts}}, protocol)


DEFAULT_512 = GpuRequest(GpuKind.SHARE, 1, 0, 512)


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param({"gpu": "1"}, id="gpu alone"),
        pytest.param({"gpu": "1", "gpumem-percentage": "0"}, id="percentage 0 is unset"),
        pytest.param({"gpu": "1", "gpumem": "0"}, id="gpumem 0 is unset"),
    ],
)
def test_default_memory_is_the_memory_of_a_request_naming_none(limits: dict[str, str]) -> None:
    assert gpu(hami_with(defaultMemory=512), **limits) == DEFAULT_512
    assert gpu(HAMI, **limits) == GpuRequest(GpuKind.WHOLE, 1)  # without the knob: the whole card


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"gpu": "2", "gpumem": "1024"}, GpuRequest(GpuKind.SHARE, 2, 0, 1024)),  # named memory wins
        ({"gpu": "1", "gpumem-percentage": "25"}, GpuRequest(GpuKind.SHARE, 1, 0, None, memory_percent=25)),
        ({"gpucores": "30"}, GpuRequest(GpuKind.SHARE, 1, 300, 512)),
    ],
)
def test_default_memory_leaves_named_memory_alone(limits: dict[str, str], expected: GpuRequest) -> None:
    assert gpu(hami_with(defaultMemory=512), **limits) == expected


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"gpu": "1"}, GpuRequest(GpuKind.SHARE, 1, 200, None, memory_percent=100)),  # all memory, 20 % compute
        ({"gpu": "1", "gpumem": "4096"}, GpuRequest(GpuKind.SHARE, 1, 200, 4096)),
        ({"gpu": "1", "gpumem": "4096", "gpucores": "0"}, GpuRequest(GpuKind.SHARE, 1, 0, 4096)),  # 0 named: kept
        ({"gpu": "1", "gpucores": "50"}, GpuRequest(GpuKind.SHARE, 1, 500, None, memory_percent=100)),
    ],
)
def test_default_cores_are_the_compute_of_a_request_naming_none(limits: dict[str, str], expected: GpuRequest) -> None:
    assert gpu(hami_with(defaultCores=20), **limits) == expected


def test_both_defaults_make_a_bare_gpu_a_small_share() -> None:
    assert gpu(hami_with(defaultMemory=1000, defaultCores=10), gpu="3") == GpuRequest(GpuKind.SHARE, 3, 100, 1000)


def test_defaults_are_memory_units_of_the_protocol() -> None:
    gib = parse_protocol_mapping({"rules.defaultMemory": 2}, "test")  # the kit's default unit, 1Gi
    request = parse_container_gpu({"name": "c", "resources": {"limits": {gib.resources.gpu: "1"}}}, gib)
    assert request == GpuRequest(GpuKind.SHARE, 1, 0, 2048)


def test_a_container_without_gpus_gets_no_default() -> None:
    assert gpu(hami_with(defaultMemory=512, defaultCores=20)) is None
    assert gpu(hami_with(defaultMemory=512, defaultCores=20), **{"mig-1g.10gb": "1"}) == GpuRequest(
        GpuKind.MIG, 1, 0, None, "1g.10gb", "nvidia.com/mig-1g.10gb"
    )


def test_the_knobs_keep_the_preset_hami() -> None:
    protocol = hami_with(memoryScaling=2, defaultMemory=512, defaultCores=20)
    assert speaks_hami(protocol)
    assert protocol.fingerprint != HAMI.fingerprint
    assert hami_with(memoryScaling=1, defaultMemory=0, defaultCores=0).fingerprint == HAMI.fingerprint


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("memoryScaling", 0, "above 0"),
        ("memoryScaling", -1.5, "above 0"),
        ("memoryScaling", 101, "at most 100"),
        ("memoryScaling", "inf", "finite"),
        ("defaultCores", 101, "0 to 100"),
        ("defaultCores", -1, "0 to 100"),
        ("defaultMemory", -1, "0 or more"),
        ("defaultMemory", "1.5", "int"),
    ],
)
def test_bad_knobs_are_refused_naming_the_key(key: str, value: object, problem: str) -> None:
    with pytest.raises(ProtocolError, match=f"rules.{key}.*{problem}"):
        hami_with(**{key: value})


@pytest.mark.parametrize(
    ("memory", "mode", "scaling", "offered"),
    [
        (143771, MigMode.OFF, 1.0, 143771),
        (143771, MigMode.OFF, 2.0, 287542),
        (15360, MigMode.OFF, 1.5, 23040),
        (23034, MigMode.OFF, 1.3, 29944),  # 29944.2: rounded down, as HAMi's int32() does
        (40960, MigMode.OFF, 0.5, 20480),  # below 1: less than the card has
        (81920, MigMode.STATIC, 2.0, 81920),  # MIG slices are the hardware's
        (81920, MigMode.DYNAMIC, 2.0, 81920),
    ],
)
def test_a_gpu_offers_its_memory_times_the_scaling(memory: int, mode: MigMode, scaling: float, offered: int) -> None:
    assert offered_memory_mib(memory, mode, scaling) == offered


def test_an_inventory_offers_each_gpu_scaled() -> None:
    inventory = NodeInventory.simulated("n1", "T4", 2)
    assert offered_inventory(inventory, 1.0) is inventory
    assert [g.memory_mib for g in offered_inventory(inventory, 2.0).gpus] == [30720, 30720]
