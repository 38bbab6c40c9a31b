"""The simulated usage model: defaults from the grant, pod annotations per pod or per container, bad
values ignored, and the annotation names following the protocol's domain."""

from __future__ import annotations

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.model import GpuUUID
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.simusage import SimulatedUsage, per_container, usage_annotations

CORE, MEMORY = usage_annotations("runtimekit.aliyun.com/simulated-runtime")


def alloc(uid: str, container: str, *grants: Grant) -> Allocation:
    return Allocation(PodRef("default", f"p-{uid}", uid), container, grants, 0)


def pod(uid: str, notes: dict[str, str]) -> Pod:
    return {"metadata": {"uid": uid, "annotations": notes}}


def test_annotation_names_follow_the_protocol_domain() -> None:
    assert (CORE, MEMORY) == (
        "runtimekit.aliyun.com/simulated-usage-core",
        "runtimekit.aliyun.com/simulated-usage-memory",
    )
    assert usage_annotations("example.com/sim")[0] == "example.com/simulated-usage-core"


@pytest.mark.parametrize(
    ("text", "container", "want"),
    [("70", "main", "70"), ("main=12Gi,side=1Gi", "side", "1Gi"), ("main=12Gi", "side", None), ("", "x", None)],
)
def test_per_container(text: str, container: str, want: str | None) -> None:
    assert per_container(text, container) == want


def test_defaults_annotations_and_over_share() -> None:
    gpu, mig = Grant("GPU-a", 0, 300, 10240), Grant("MIG-x", 1, 1000, 20096, parent_uuid="GPU-b", mig_profile="2g.20gb")
    allocations = [
        alloc("u1", "main", gpu),
        alloc("u2", "main", gpu),
        alloc("u3", "main", mig),
        alloc("u4", "main", gpu),
        alloc("u5", "main", Grant("", 1, 1000, 20096, parent_uuid="GPU-b", mig_profile="2g.20gb", mig_dynamic=True)),
    ]
    pods = {
        "u2": pod("u2", {CORE: "80", MEMORY: "main=12Gi"}),  # over its 30 % and its 10 GiB
        "u4": pod("u4", {CORE: "lots", MEMORY: "-1Gi"}),  # unparsable: defaults
    }
    got = SimulatedUsage((CORE, MEMORY)).containers(allocations, pods)
    assert [(u.pod_uid, u.memory_used_mib, u.sm_percent, u.over_share) for u in got] == [
        ("u1", 7168, 18.0, False),  # 70 % of 10 GiB, 60 % of a 30 % share
        ("u2", 12288, 80.0, True),
        ("u3", 14067, 60.0, False),
        ("u4", 7168, 18.0, False),
    ]  # u5: a dynamic MIG device not made yet has no usage
    assert (got[2].gpu_uuid, got[2].device_uuid) == (GpuUUID("GPU-b"), "MIG-x")
    assert got[1].over_memory
    assert got[1].over_core
