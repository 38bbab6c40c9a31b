"""`inspect_claims.claim_shares`: a DRA claim's allocation shown as a share of the GPU its device names
(`uuid` attribute), its consumed capacity or the whole device, under the one container using it (else
its first consumer); devices of no GPU and claims not allocated are left out."""

from __future__ import annotations

from typing import Any, cast

from runtimekit.cli.inspect_claims import claim_shares
from runtimekit.cli.inspect_view import PodShare
from runtimekit.kube.objects import Pod
from runtimekit.kube.objects.dra import ResourceClaim, ResourceSlice

DRIVER = "gpu.runtimekit.aliyun.com"


def device(name: str, uuid: str) -> dict[str, Any]:
    attributes = {"uuid": {"string": uuid}} if uuid else {}
    return {"name": name, "attributes": attributes, "capacity": {"core": {"value": "100"}, "memory": {"value": "80Gi"}}}


SLICE = cast(
    ResourceSlice,
    {
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "n1"},
            "devices": [device("gpu-0", "GPU-a"), device("gpu-1", "GPU-b"), device("nic", "")],
        }
    },
)


def claim(name: str, results: list[dict[str, Any]], users: list[str]) -> ResourceClaim:
    status: dict[str, Any] = {"reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in users]}
    if results:
        status["allocation"] = {"devices": {"results": [{"driver": DRIVER, "pool": "n1", **r} for r in results]}}
    return cast(ResourceClaim, {"metadata": {"namespace": "ml", "name": name}, "status": status})


def user(name: str, claim_name: str, request: str = "") -> Pod:
    ref = {"name": "gpu", **({"request": request} if request else {})}
    return cast(
        Pod,
        {
            "metadata": {"namespace": "ml", "name": name},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
                "containers": [{"name": "main", "resources": {"claims": [ref]}}, {"name": "side"}],
            },
        },
    )


def test_claims_become_shares_of_their_gpus() -> None:
    claims = [
        claim("quarter", [{"device": "gpu-0", "consumedCapacity": {"core": "25", "memory": "16Gi"}}], ["p1", "p2"]),
        claim("whole", [{"device": "gpu-1"}], []),
        claim("nic", [{"device": "nic"}], ["p3"]),
        claim("pending", [], ["p4"]),
    ]
    assert claim_shares(claims, [SLICE]) == {
        "GPU-a": [PodShare("ml", "p1", "", 250, 16384, claim="quarter")],  # its users' pods not listed
        "GPU-b": [PodShare("ml", "whole", "", 1000, 81920, claim="whole")],
    }


def test_a_share_is_named_after_the_one_container_using_it() -> None:
    mine = claim("mine", [{"request": "gpu", "device": "gpu-0", "consumedCapacity": {"core": "50"}}], ["p1"])
    shared = claim("shared", [{"request": "gpu", "device": "gpu-1"}], ["p2", "p3"])
    other = claim("other", [{"request": "gpu", "device": "gpu-1"}], ["p4"])
    pods = [user("p1", "mine"), user("p2", "shared"), user("p3", "shared"), user("p4", "other", request="x")]
    got = claim_shares([mine, shared, other], [SLICE], pods)
    assert [(s.pod, s.container, s.claim) for s in got["GPU-a"]] == [("p1", "main", "mine")]
    assert got["GPU-a"][0].memory_mib == 81920  # no memory consumed named: the whole device's
    assert [(s.pod, s.container, s.claim) for s in got["GPU-b"]] == [
        ("p4", "", "other"),  # its container names another request of the claim
        ("p2", "", "shared"),  # two containers share it: under its first consumer
    ]


def test_a_device_of_another_pool_is_not_a_gpu_of_this_one() -> None:
    moved = claim("elsewhere", [{"device": "gpu-0", "pool": "n2"}], ["p"])
    assert claim_shares([moved], [SLICE]) == {}
