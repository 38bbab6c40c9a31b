"""Which running containers hold devices without an allocation, and what each is rebuilt from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_helpers import NODE, pod_manifest

from runtimekit.api.podresources_client import ListedContainer, ListedPod
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, Grant, PodRef
from runtimekit.runtime.rebuild import FROM_ASSIGNMENT, FROM_KUBELET, evidence, missing_allocations
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec

P = KitProtocol.default()
RES = P.resources
GPU0, GPU1 = simulated_uuid(NODE, 0), simulated_uuid(NODE, 1)
DEVICES = SimulatedBackend(NODE, parse_gpu_spec("2xH200")).devices()
H200 = 143771


def assigned(name: str, uid: str, gpu: int = 1, **extra: Any) -> dict[str, Any]:
    share = GpuShare(GpuUUID(simulated_uuid(NODE, gpu)), gpu, 300, 8192)
    return pod_manifest(name, uid, Assignment(NodeName(NODE), {"main": (share,)}).to_annotation(), **extra)


def kubelet_lists(name: str, **devices: tuple[str, ...]) -> ListedPod:
    names = {"gpu": RES.gpu, "core": RES.core, "memory": RES.memory}
    return ListedPod("default", name, (ListedContainer("main", {names[k]: v for k, v in devices.items()}),))


def rebuild(
    pods: list[dict[str, Any]] | None, listing: list[ListedPod] | None, held: tuple[Allocation, ...] = ()
) -> Any:
    proof = evidence(pods, listing, P)
    return missing_allocations(held, proof, pods, DEVICES, NODE, P, now_ms=7)


def test_a_container_kubelet_lists_with_devices_is_rebuilt_from_its_assignment() -> None:
    found, unaccounted = rebuild([assigned("p", "u1")], [kubelet_lists("p", core=(f"{GPU1}::0",) * 30)])
    assert unaccounted == []
    ((item,),) = [found]
    assert item.source == FROM_ASSIGNMENT
    assert (item.allocation.key, item.allocation.grants) == (("u1", "main"), (Grant(GPU1, 1, 300, 8192),))
    assert item.allocation.resource_names == (RES.core,)


@pytest.mark.parametrize(
    ("devices", "grant"),
    [
        pytest.param({"gpu": (GPU0,)}, Grant(GPU0, 0, 1000, H200), id="a whole GPU"),
        pytest.param(
            {"core": (f"{GPU0}::1",) * 20, "memory": (f"{GPU0}::1",) * 4}, Grant(GPU0, 0, 200, 4096), id="a share"
        ),
        pytest.param({"core": (f"{GPU0}::1",) * 50}, Grant(GPU0, 0, 500, H200 // 2), id="memory in proportion"),
    ],
)  # fmt: skip
def test_without_an_assignment_kubelets_device_ids_say_what_it_holds(devices: dict[str, Any], grant: Grant) -> None:
    bare = pod_manifest("p", "u1")
    found, unaccounted = rebuild([bare], [kubelet_lists("p", **devices)])
    assert unaccounted == []
    assert [(m.source, m.allocation.grants) for m in found] == [(FROM_KUBELET, (grant,))]


def test_what_is_held_or_finished_needs_nothing() -> None:
    held = (Allocation(PodRef("default", "p", "u1"), "main", (Grant(GPU1, 1, 300, 8192),), 1),)
    listing = [kubelet_lists("p", gpu=(GPU1,)), kubelet_lists("done", gpu=(GPU0,))]
    pods = [assigned("p", "u1"), assigned("done", "u2", 0, phase="Succeeded")]
    assert rebuild(pods, listing, held) == ([], [])


def test_a_container_whose_pod_is_not_in_the_api_server_is_unaccounted() -> None:
    found, unaccounted = rebuild([], [kubelet_lists("gone", gpu=(GPU0,))])
    assert found == []
    assert unaccounted == [
        f"default/gone container main: holds devices {GPU0} with no allocation, and its pod is not in the API server"
    ]


def test_without_podresources_the_allocated_record_is_the_evidence() -> None:
    record = json.dumps({"version": 1, "containers": {"main": [RES.core]}})
    pods = [assigned("p", "u1", annotations={P.annotations.allocated: record}), assigned("waiting", "u2")]
    found, unaccounted = rebuild(pods, None)
    assert [m.allocation.key for m in found] == [("u1", "main")]
    assert unaccounted == []
