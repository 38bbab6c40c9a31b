"""A peer's name the active protocol does not read is found, with the presets that would read it."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.protocol import KitProtocol
from runtimekit.protocol.peers import ANNOTATION, RESOURCE, foreign_names, presets_answering
from runtimekit.protocol.presets import preset_protocol


def pod(annotations: dict[str, str] | None = None, limits: dict[str, int] | None = None) -> dict[str, Any]:
    resources = {"limits": limits or {}}
    return {
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "resources": resources}]},
    }


HAMI_POD = pod({"nvidia.com/use-gputype": "A100,V100"}, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})


@pytest.mark.parametrize(
    ("protocol", "manifest", "found"),
    [
        pytest.param(
            KitProtocol.default(),
            HAMI_POD,
            [
                (ANNOTATION, "nvidia.com/use-gputype", ("hami", "volcano-vgpu")),
                (RESOURCE, "nvidia.com/gpu", ("hami", "nvidia")),
                (RESOURCE, "nvidia.com/gpumem", ("hami",)),
            ],
            id="hami-pod-under-the-default-protocol",
        ),
        pytest.param(preset_protocol("hami"), HAMI_POD, [], id="hami-pod-under-hami"),
        pytest.param(
            preset_protocol("nvidia"),
            HAMI_POD,
            [
                (ANNOTATION, "nvidia.com/use-gputype", ("hami", "volcano-vgpu")),
                (RESOURCE, "nvidia.com/gpumem", ("hami",)),
            ],
            id="hami-pod-under-nvidia",
        ),
        pytest.param(
            KitProtocol.default(),
            pod(limits={"aliyun.com/gpu-mem": 2}),
            [(RESOURCE, "aliyun.com/gpu-mem", ("gpushare",))],
            id="gpushare-pod",
        ),
        pytest.param(
            preset_protocol("hami"),
            pod(limits={"volcano.sh/vgpu-memory": 1024, "volcano.sh/vgpu-number": 1}),
            [
                (RESOURCE, "volcano.sh/vgpu-memory", ("volcano-vgpu",)),
                (RESOURCE, "volcano.sh/vgpu-number", ("volcano-vgpu",)),
            ],
            id="volcano-pod-under-hami",
        ),
        pytest.param(
            KitProtocol.default(),
            pod(limits={"nvidia.com/mig-1g.10gb": 1}),
            [(RESOURCE, "nvidia.com/mig-1g.10gb", ("hami", "volcano-vgpu", "nvidia"))],
            id="nvidia-mig-slice",
        ),
        pytest.param(
            preset_protocol("hami"),
            pod({"nvidia.com/vgpu-mode": "mig", "example.com/mine": "x"}, {"nvidia.com/gpu": 1}),
            [(ANNOTATION, "nvidia.com/vgpu-mode", ())],
            id="a-name-no-preset-reads",
        ),
        pytest.param(
            KitProtocol.default(), pod({"example.com/x": "y"}, {"example.com/fpga": 1}), [], id="nobody-elses-names"
        ),
    ],
)
def test_foreign_names(
    protocol: KitProtocol, manifest: dict[str, Any], found: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    assert [(f.kind, f.name, f.presets) for f in foreign_names(manifest, protocol)] == found


def test_a_resource_some_node_offers_is_counted_as_any_extended_resource_not_reported() -> None:
    manifest = pod(limits={"nvidia.com/gpu": 1})
    assert foreign_names(manifest, KitProtocol.default(), offered={"nvidia.com/gpu"}) == []


def test_messages_name_the_name_and_the_preset() -> None:
    messages = [f.message() for f in foreign_names(HAMI_POD, KitProtocol.default())]
    assert messages[0] == (
        "annotation nvidia.com/use-gputype is not read by this cluster's protocol, so it has no effect; "
        "the 'hami' preset or the 'volcano-vgpu' preset reads it (runtimekit protocol preset hami)"
    )
    assert messages[2].startswith("resource nvidia.com/gpumem is not a GPU resource of this cluster's protocol")
    assert messages[2].endswith("the 'hami' preset reads it (runtimekit protocol preset hami)")


def test_a_malformed_pod_yields_what_can_be_read() -> None:
    assert (
        foreign_names({"metadata": None, "spec": {"containers": [None, {"resources": 5}]}}, KitProtocol.default()) == []
    )


@pytest.mark.parametrize(
    ("name", "presets"), [("hami-scheduler", ("hami",)), ("volcano", ("volcano-vgpu",)), ("x", ())]
)
def test_presets_answering_a_scheduler_name(name: str, presets: tuple[str, ...]) -> None:
    assert presets_answering(name) == presets
