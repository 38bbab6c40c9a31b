"""What an assignment may say: exactly what the pod asks for (`request_problems`), each GPU once, and
only with the scheduler's signature over the pod's UID and the annotation's text."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.base.keyring import KeyRing
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, parse_pod_request
from runtimekit.model.authority import request_problems, sign_assignment, signature_problem
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
RES = P.resources
H200 = 143771
MEMORY = {"GPU-0": H200, "GPU-1": H200}


def pod(**limits: str) -> dict[str, Any]:
    names = {"gpu": RES.gpu, "core": RES.core, "memory": RES.memory, "mig": RES.mig_prefix + "1g.18gb"}
    asked = {names[k]: v for k, v in limits.items()}
    return {"spec": {"containers": [{"name": "main", "resources": {"limits": asked}}, {"name": "side"}]}}


def share(gpu: int, milli: int, mib: int, profile: str = "", start: int = -1) -> GpuShare:
    if profile:
        return GpuShare(GpuUUID(""), gpu, 0, mib, profile, GpuUUID(f"GPU-{gpu}"), start)
    return GpuShare(GpuUUID(f"GPU-{gpu}"), gpu, milli, mib)


def problems(limits: dict[str, str], *shares: GpuShare, side: tuple[GpuShare, ...] = ()) -> list[str]:
    containers = {"main": shares} | ({"side": side} if side else {})
    return request_problems(Assignment(NodeName("n"), containers), parse_pod_request(pod(**limits), P), MEMORY)


@pytest.mark.parametrize(
    ("limits", "shares"),
    [
        pytest.param({"gpu": "1"}, [share(0, 1000, H200)], id="a whole GPU"),
        pytest.param({"gpu": "2"}, [share(0, 1000, H200), share(1, 1000, H200)], id="two whole GPUs"),
        pytest.param({"core": "30", "memory": "8"}, [share(1, 300, 8192)], id="a share"),
        pytest.param({"core": "30"}, [share(1, 300, H200 * 300 // 1000)], id="memory in proportion"),
        pytest.param({"memory": "8"}, [share(0, 0, 8192)], id="memory only"),
        pytest.param({"gpu": "2", "core": "50"}, [share(0, 500, H200 // 2), share(1, 500, H200 // 2)], id="per GPU"),
        pytest.param({"mig": "2"}, [share(0, 0, 18432, "1g.18gb", 0), share(0, 0, 18432, "1g.18gb", 1)], id="MIG"),
    ],
)
def test_an_assignment_equal_to_the_requests_passes(limits: dict[str, str], shares: list[GpuShare]) -> None:
    assert problems(limits, *shares) == []


@pytest.mark.parametrize(
    ("limits", "shares", "side", "problem"),
    [
        pytest.param({"core": "1"}, [share(0, 1000, H200)], (), "asks for 10 milli, assigned 1000", id="whole for 1 %"),
        pytest.param({"core": "1"}, [share(0, 0, 0)], (), "asks for 10 milli, assigned 0", id="nothing for 1 %"),
        pytest.param({"gpu": "1"}, [share(0, 1000, 1)], (), f"asks for {H200} MiB, assigned 1", id="whole, no memory"),
        pytest.param({"gpu": "1"}, [share(0, 1000, H200)] * 2, (), "asks for 1 GPUs, assigned 2", id="more GPUs"),
        pytest.param({"gpu": "2"}, [share(0, 1000, H200)] * 2, (), "GPU GPU-0 is assigned twice", id="a GPU twice"),
        pytest.param({"core": "30", "memory": "8"}, [share(0, 300, 9216)], (), "asks for 8192 MiB", id="more memory"),
        pytest.param({"gpu": "1"}, [share(0, 1000, H200)], (share(1, 10, 1),), "'side' asks for no GPU", id="a side"),
        pytest.param({"mig": "1"}, [share(0, 1000, H200)], (), "asks for 1g.18gb MIG slices", id="a GPU for MIG"),
        pytest.param(
            {"mig": "2"}, [share(0, 0, 18432, "1g.18gb", 0)] * 2, (), "1g.18gb@0 of GPU GPU-0 is assigned twice",
            id="a MIG slot twice",
        ),
    ],
)  # fmt: skip
def test_an_assignment_that_differs_from_the_requests_says_where(
    limits: dict[str, str], shares: list[GpuShare], side: tuple[GpuShare, ...], problem: str
) -> None:
    found = problems(limits, *shares, side=side)
    assert any(problem in p for p in found), found


def test_the_signature_binds_the_text_to_the_pods_uid() -> None:
    keys = KeyRing.from_secrets(b"k" * 32)
    text = Assignment(NodeName("n"), {"main": (share(0, 300, 8192),)}).to_annotation()
    signature = sign_assignment(keys, "uid-1", text)
    assert signature_problem(keys, "uid-1", text, signature) == ""
    assert "signature does not match" in signature_problem(keys, "uid-2", text, signature)  # copied to another pod
    assert "signature does not match" in signature_problem(keys, "uid-1", text.replace("300", "1000"), signature)
    assert "not signed by the scheduler" in signature_problem(keys, "uid-1", text, None)
    assert "no UID" in signature_problem(keys, "", text, signature)
