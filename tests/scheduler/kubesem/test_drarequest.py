"""A claim-using pod's GPU request as the device-plugin path would have it (`kubesem/drarequest.py`):
the kit's class, whole GPUs or a share by `core`/`memory`, memory in proportion to core when not
named (all of it under a `whole` memory default), anything else left to the allocator alone."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.kube.objects import Pod, ResourceClaim
from runtimekit.model import ContainerGpuRequest, GpuKind, GpuRequest, PodRequest
from runtimekit.scheduler.kubesem.drarequest import KIT_CLASS, claim_gpus, with_claims

C = "resourceclaim:default/c/gpu"


def claim(exactly: dict[str, Any], allocated: bool = False, **spec: Any) -> dict[str, ResourceClaim]:
    body: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": KIT_CLASS, **exactly}}]}},
    }
    body["spec"]["devices"].update(spec)
    if allocated:
        body["status"] = {"allocation": {"devices": {"results": []}}}
    return {"default/c": cast(ResourceClaim, body)}


POD = cast(
    Pod, {"metadata": {"namespace": "default"}, "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}}
)


def share(requests: dict[str, str], count: int = 1) -> dict[str, Any]:
    return {"count": count, "capacity": {"requests": requests}}


@pytest.mark.parametrize(
    ("exactly", "whole_memory", "expected"),
    [
        ({}, False, GpuRequest(GpuKind.WHOLE, 1)),
        ({"count": 2}, False, GpuRequest(GpuKind.WHOLE, 2)),
        (share({"core": "30", "memory": "4Gi"}), False, GpuRequest(GpuKind.SHARE, 1, 300, 4096)),
        (share({"core": "25"}, 2), False, GpuRequest(GpuKind.SHARE, 2, 250)),  # memory in proportion
        (share({"core": "25"}), True, GpuRequest(GpuKind.SHARE, 1, 250, memory_percent=100)),
        (share({"memory": "8Gi"}), False, GpuRequest(GpuKind.SHARE, 1, 1000, 8192)),  # the policy's default core
        (share({f"{KIT_CLASS}/core": "50"}), False, GpuRequest(GpuKind.SHARE, 1, 500)),
    ],
)
def test_the_kits_claims_ask_what_the_device_plugin_resources_would(
    exactly: dict[str, Any], whole_memory: bool, expected: GpuRequest
) -> None:
    assert claim_gpus(POD, claim(exactly), whole_memory) == (ContainerGpuRequest(C, expected),)


@pytest.mark.parametrize(
    ("claims"),
    [
        claim({"deviceClassName": "gpu.nvidia.com"}),
        claim({"selectors": [{"cel": {"expression": "true"}}]}),
        claim({"allocationMode": "All"}),
        claim({"adminAccess": True}),
        claim(share({"bandwidth": "1"})),
        claim(share({"core": "300"})),  # beyond a GPU: the allocator says why
        claim({}, constraints=[{"matchAttribute": "x"}]),
        claim({}, allocated=True),
        {},  # not made yet
    ],
)
def test_anything_else_is_left_to_the_allocator(claims: dict[str, ResourceClaim]) -> None:
    assert claim_gpus(POD, claims) is None
    plain = PodRequest(1000, 0)
    assert with_claims(plain, POD, claims, False) is plain


def test_a_bound_pods_allocated_claims_count_and_device_plugin_gpus_keep_the_request() -> None:
    allocated = claim({}, allocated=True)
    assert claim_gpus(POD, allocated, allocated_too=True) == (ContainerGpuRequest(C, GpuRequest(GpuKind.WHOLE, 1)),)
    mixed = PodRequest(1000, 0, (ContainerGpuRequest("main", GpuRequest(GpuKind.WHOLE, 1)),))
    assert with_claims(mixed, POD, claim({}), False) is mixed
    assert with_claims(PodRequest(1000, 0), POD, claim({}), False).gpu_milli == 1000
