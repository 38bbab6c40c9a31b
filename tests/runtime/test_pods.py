"""Pods as the runtime sees them: rebuilding allocations from assignments, and deciding what is stale."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import NODE, pod_manifest

from runtimekit.api.kubelet_dra import CLAIM_RESOURCE
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.pods import allocations_from_pods, stale_allocations


def test_allocations_from_pods() -> None:
    assignment = Assignment(
        NodeName(NODE),
        {
            "a": (GpuShare(GpuUUID("GPU-1"), 1, 300, 512),),
            "b": (GpuShare(GpuUUID("MIG-1"), 0, 0, 0, "1g.10gb", GpuUUID("GPU-0"), 0),),
            "c": (),
        },
    ).to_annotation()
    pods = [
        pod_manifest("p", "u1", assignment),
        pod_manifest("bad", "u2", "{not json"),
        pod_manifest("other", "u3", Assignment(NodeName("node-b"), {"a": ()}).to_annotation()),
        pod_manifest("finished", "u4", assignment, phase="Succeeded"),
    ]
    found, skipped = allocations_from_pods(pods, NODE, KitProtocol.default(), 99)
    assert [(a.pod.uid, a.container, a.grants, a.created_unix_ms) for a in found] == [
        ("u1", "a", (Grant("GPU-1", 1, 300, 512),), 99),
        ("u1", "b", (Grant("MIG-1", 0, 0, 0, "GPU-0", "1g.10gb", 0),), 99),
    ]
    assert len(skipped) == 2
    assert "not JSON" in skipped[0]
    assert "assigned to node node-b" in skipped[1]


def _alloc(uid: str, name: str | None = None, created: int = 0) -> Allocation:
    return Allocation(PodRef("default", name or f"pod-{uid}", uid), "main", (Grant("GPU-0", 0, 1, 1),), created)


LIVE = [pod_manifest("pod-live", "live"), pod_manifest("pod-done", "done", phase="Succeeded")]


@pytest.mark.parametrize(
    ("api", "kubelet", "expected"),
    [
        pytest.param(None, None, {}, id="no-source-no-release"),
        pytest.param(
            LIVE,
            None,
            {"gone": "not on this node in the API server", "done": "pod is Succeeded"},
            id="api-only",
        ),
        pytest.param(
            None,
            {("default", "pod-live")},
            {
                "gone": "not listed by kubelet's PodResources",
                "done": "not listed by kubelet's PodResources",
            },
            id="kubelet-only",
        ),
        pytest.param(LIVE, {("default", "pod-gone")}, {"done": "pod is Succeeded"}, id="kubelet-still-runs-it"),
        pytest.param(
            [*LIVE, pod_manifest("pod-gone", "new-uid")],
            None,
            {"gone": "replaced by a new pod of the same name", "done": "pod is Succeeded"},
            id="same-name-new-uid",
        ),
    ],
)
def test_stale_allocations(
    api: list[dict[str, Any]] | None, kubelet: set[tuple[str, str]] | None, expected: dict[str, str]
) -> None:
    allocations = [_alloc("live"), _alloc("gone"), _alloc("done"), _alloc("young", created=990)]
    stale = stale_allocations(allocations, api, kubelet, now_ms=1000, grace_ms=100)
    assert {a.pod.uid: why for a, why in stale} == expected


def deleting(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return manifest


@pytest.mark.parametrize(
    ("kubelet", "expected"),
    [
        pytest.param(set(), {"live": "being deleted, and kubelet no longer runs it"}, id="containers-stopped"),
        pytest.param({("default", "pod-live")}, {}, id="kubelet-still-runs-it"),
        pytest.param(None, {}, id="no-kubelet-to-ask"),
    ],
)
def test_a_pod_being_deleted_is_released_once_kubelet_stopped_it(
    kubelet: set[tuple[str, str]] | None, expected: dict[str, str]
) -> None:
    stale = stale_allocations([_alloc("live")], [deleting(pod_manifest("pod-live", "live"))], kubelet, 1000, 100)
    assert {a.pod.uid: why for a, why in stale} == expected


def test_a_young_allocation_is_released_only_on_its_own_pods_evidence() -> None:
    """The grace protects allocations whose pod a list does not show yet; a pod that the API server
    shows finished, or being deleted after kubelet stopped it, is over however young its allocation
    (the scheduler may already have given its GPU to the next pod)."""
    young = [_alloc("done", created=990), _alloc("deleted", created=990), _alloc("absent", created=990)]
    api = [pod_manifest("pod-done", "done", phase="Succeeded"), deleting(pod_manifest("pod-deleted", "deleted"))]
    stale = stale_allocations(young, api, set(), now_ms=1000, grace_ms=100)
    assert {a.pod.uid: why for a, why in stale} == {
        "done": "pod is Succeeded",
        "deleted": "being deleted, and kubelet no longer runs it",
    }
    renamed = [_alloc("new-uid", name="pod-x", created=990)]  # the list may still show the old pod
    assert stale_allocations(renamed, [pod_manifest("pod-x", "old-uid")], None, 1000, 100) == []


def test_a_prepared_claims_allocation_is_never_stale() -> None:
    """A ResourceClaim's allocation (made by the DRA plugin) has no pod of its uid: kubelet releases it
    through NodeUnprepareResources, so no pod list may release it."""
    claim = Allocation(
        PodRef("default", "claim", "claim-uid"), "gpu", (Grant("GPU-0", 0, 1, 1),), 0, (), (CLAIM_RESOURCE,)
    )
    pod = _alloc("gone")
    stale = stale_allocations([claim, pod], [], set(), now_ms=1000, grace_ms=100)
    assert [a.pod.uid for a, _ in stale] == ["gone"]
