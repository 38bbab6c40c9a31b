"""GPU selection annotations no GPU could satisfy, or that are not what they name, as a table."""

from __future__ import annotations

import pytest

from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol
from runtimekit.webhook.annotations import annotation_problems

HAMI = preset_protocol("hami")
USE, AVOID = "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
UUID, NOUUID = "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"
G1 = "GPU-8f6b4b5a-1c2d-3e4f-5a6b-7c8d9e0f1a2b"
G2 = "GPU-00000000-1111-2222-3333-444444444444"

CASES = [
    ("nothing asked", HAMI, {}, []),
    ("use and avoid different models", HAMI, {USE: "A100", AVOID: "H200"}, []),
    ("one model both ways, any case", HAMI, {USE: "A100", AVOID: "a100"}, [f"metadata.annotations[{USE}]"]),
    (
        "avoiding a part of every model used",
        HAMI,
        {USE: "A100-80GB,A100-40GB", AVOID: "A100"},
        [f"metadata.annotations[{USE}]"],
    ),
    ("one of two models left", HAMI, {USE: "A100,H200", AVOID: "A100"}, []),
    ("blank entries mean nothing", HAMI, {USE: " , ", AVOID: "A100"}, []),
    ("one UUID both ways", HAMI, {UUID: G1, NOUUID: f"{G2},{G1}"}, [f"metadata.annotations[{UUID}]"]),
    ("a UUID left", HAMI, {UUID: f"{G1},{G2}", NOUUID: G1}, []),
    ("a malformed UUID", HAMI, {UUID: "gpu0"}, [f"metadata.annotations[{UUID}]"]),
    ("a malformed UUID to avoid", HAMI, {NOUUID: f"{G1}, 3"}, [f"metadata.annotations[{NOUUID}]"]),
    ("a MIG UUID", HAMI, {UUID: "MIG-4b6a1b2c-0d1e-5f2a-8b3c-4d5e6f7a8b9c"}, []),
]


@pytest.mark.parametrize(("name", "protocol", "annotations", "fields"), CASES, ids=[c[0] for c in CASES])
def test_annotation_problems(name: str, protocol: KitProtocol, annotations: dict[str, str], fields: list[str]) -> None:
    assert [p.field for p in annotation_problems(annotations, protocol)] == fields


def test_the_message_names_the_other_annotation() -> None:
    (problem,) = annotation_problems({USE: "A100", AVOID: "a100"}, HAMI)
    assert problem.render() == (
        f'metadata.annotations[{USE}]: Invalid value: "A100": every model it names is also avoided by '
        f"metadata.annotations[{AVOID}] (a100), so no GPU could be used"
    )


def test_exact_models_under_the_kits_own_names() -> None:
    kit = KitProtocol.default()
    assert annotation_problems({kit.annotations.gpu_models: "A100"}, kit) == []  # no avoid list: nothing to contradict
