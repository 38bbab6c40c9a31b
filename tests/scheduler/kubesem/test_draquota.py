"""The figures of Volcano's DRA queue quotas (capacity plugin, "DeviceClass Quota"), with the facts of
Volcano's own tests (capacity_test.go's DRA tests, cache_dra_test.go): what claims ask, what a queue
may and does hold, a shared claim counted once, and the status keys."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from runtimekit.scheduler.kubesem.draquota import (
    DraAmount,
    DraLimit,
    QueueClaims,
    claim_demand,
    exceeded,
    is_dra_key,
    parse_limits,
    pod_demands,
    status_entries,
    total_demand,
)

GI = 1 << 30


def claim(name: str, *requests: dict[str, Any], namespace: str = "ns1") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests)}},
    }


def exactly(name: str, cls: str, count: int | None = None, **capacity: str) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        body["count"] = count
    if capacity:
        body["capacity"] = {"requests": capacity}
    return {"name": name, "exactly": body}


def pod(*claims: dict[str, str], statuses: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns1"},
        "spec": {"resourceClaims": list(claims), "containers": [{"name": "c"}]},
        "status": {"resourceClaimStatuses": statuses or []},
    }


def test_a_queue_names_counts_and_consumable_capacities_per_device_class() -> None:
    limits = parse_limits(
        {
            "cpu": "8",
            "deviceclass/gpu.example.com": "2",
            "memory.deviceclass/gpu.example.com": "120Gi",
            "cores.deviceclass/vgpu.example.com": "800",
            ".deviceclass/empty-dimension": "1",
            "deviceclass/": "3",
            "deviceclass/half": "1.5",  # rounded up, as Quantity.Value() does
        }
    )
    assert limits == {
        "gpu.example.com": DraLimit(2, {"memory": Fraction(120 * GI)}),
        "half": DraLimit(2, {}),
        "vgpu.example.com": DraLimit(0, {"cores": Fraction(800)}),
    }
    assert is_dra_key("deviceclass/x")
    assert is_dra_key("memory.deviceclass/x")
    assert not is_dra_key("nvidia.com/gpu")
    assert not is_dra_key(".deviceclass/x")


def test_what_a_claim_asks_counts_exact_requests_and_multiplies_capacity_by_count() -> None:
    asked = claim_demand(
        claim(
            "c",
            exactly("a", "gpu.com", 2, memory="8Gi"),
            exactly("b", "gpu.com", 3),
            exactly("c", "nic.com"),  # count unset: one device
            {"name": "d", "exactly": {"deviceClassName": "gpu.com", "allocationMode": "All"}},  # not counted
            {"name": "e", "firstAvailable": [{"name": "x", "deviceClassName": "gpu.com"}]},  # not counted
            {"name": "f", "exactly": {"deviceClassName": ""}},
        )
    )
    assert asked == {
        "gpu.com": DraAmount(5, {"memory": Fraction(16 * GI)}),
        "nic.com": DraAmount(1, {}),
    }


def test_a_pods_claims_are_read_by_name_or_through_its_status_once_each() -> None:
    claims = {
        "ns1/direct": claim("direct", exactly("r", "gpu.com", 1)),
        "ns1/made-abc": claim("made-abc", exactly("r", "gpu.com", 2)),
        "ns1/nothing": claim("nothing", {"name": "r", "firstAvailable": []}),
    }
    demands = pod_demands(
        pod(
            {"name": "a", "resourceClaimName": "direct"},
            {"name": "again", "resourceClaimName": "direct"},
            {"name": "b", "resourceClaimTemplateName": "t"},
            {"name": "c", "resourceClaimTemplateName": "t2"},
            {"name": "d", "resourceClaimName": "missing"},
            {"name": "e", "resourceClaimName": "nothing"},
            statuses=[{"name": "b", "resourceClaimName": "made-abc"}],
        ),
        claims,
    )
    assert list(demands) == ["ns1/direct", "ns1/made-abc"]
    assert total_demand(demands) == {"gpu.com": DraAmount(3, {})}


def test_a_shared_claim_is_held_once_until_its_last_pod_goes() -> None:
    shared = {"ns1/shared": {"gpu.com": DraAmount(1)}}
    other = {"ns1/other": {"gpu.com": DraAmount(1)}}
    held = QueueClaims()
    held.add(shared)
    assert held.new_part(shared) == {}  # a second pod of the same claim adds nothing
    held.add(shared)
    assert held.allocated == {"gpu.com": DraAmount(1)}
    limits = {"gpu.com": DraLimit(1)}
    assert exceeded(limits, held.allocated, held.new_part(shared), consumable=False) == ""
    assert exceeded(limits, held.allocated, held.new_part(other), consumable=False).startswith("deviceclass/gpu.com")
    held.remove(shared)
    assert held.allocated == {"gpu.com": DraAmount(1)}
    held.remove(shared)
    assert held.allocated == {"gpu.com": DraAmount(0)}
    assert held.refs == {}


def test_limits_pass_unnamed_classes_and_check_capacity_only_when_consumable() -> None:
    limits = {
        "gpu.com": DraLimit(2, {"memory": Fraction(16 * GI)}),
        "cores-only": DraLimit(0, {"cores": Fraction(100)}),
    }
    inqueue = {"gpu.com": DraAmount(1, {"memory": Fraction(8 * GI)})}
    request = {"gpu.com": DraAmount(1, {"memory": Fraction(16 * GI)})}
    # Volcano: inqueue (1, 8Gi) plus a request (1, 16Gi) against (2, 16Gi) is refused at enqueue ...
    assert "memory.deviceclass/gpu.com" in exceeded(limits, {}, request, consumable=True, inqueue=inqueue)
    # ... and admitted for allocation, where inqueue does not count
    assert exceeded(limits, {}, request, consumable=True) == ""
    assert exceeded(limits, {}, {"gpu.com": DraAmount(3)}, consumable=False).startswith("deviceclass/gpu.com: 0 held")
    assert exceeded(limits, {}, {"nic.com": DraAmount(100)}, consumable=True) == ""  # not named: not limited
    assert exceeded(limits, {}, {"cores-only": DraAmount(50)}, consumable=True) == ""  # no count limit
    unnamed_dimension = {"gpu.com": DraAmount(1, {"cores": Fraction(10)})}
    assert "does not name it" in exceeded(limits, {}, unnamed_dimension, consumable=True)
    assert exceeded(limits, {}, unnamed_dimension, consumable=False) == ""
    huge = {"gpu.com": DraAmount(2**63 - 1)}
    assert exceeded({"gpu.com": DraLimit(8)}, {}, huge, consumable=False)
    assert exceeded({"gpu.com": DraLimit(8)}, {}, {"gpu.com": DraAmount(4)}, consumable=False) == ""


def test_the_status_names_what_the_queue_holds() -> None:
    held = {
        "gpu.example.com": DraAmount(2, {}),
        "vgpu.example.com": DraAmount(0, {"cores": Fraction(300), "memory": Fraction(8 * GI), "zero": Fraction(0)}),
    }
    assert status_entries(held) == {
        "deviceclass/gpu.example.com": "2",
        "cores.deviceclass/vgpu.example.com": "300",
        "memory.deviceclass/vgpu.example.com": "8Gi",
    }
