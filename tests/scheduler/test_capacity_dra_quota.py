"""Volcano's DRA queue quotas end to end: the live scheduler on the embedded API server with
`capacity.DynamicResourceAllocationEnable` (and `DRAConsumableCapacityEnable`): pods sharing one claim
hold it once, a consumable capacity caps what the queue's claims ask, and with the flag off the same
quota limits nothing. Then the queue's `status.allocated` as the cluster cache works it out: the DRA
devices its bound pods' claims hold, each claim once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.dra import CLAIMS
from runtimekit.scheduler.scheduling_queue import SchedulingQueue
from scheduler.fake_api import P, node_object
from scheduler.live_tables import run_live
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_queue


def conf(consumable: bool, enabled: bool = True) -> str:
    lines = [
        'actions: "enqueue, allocate"',
        "tiers:",
        "- plugins:",
        "  - name: gang",
        "  - name: predicates",
        "  - name: capacity",
        "    arguments:",
        f"      capacity.DynamicResourceAllocationEnable: {str(enabled).lower()}",
        f"      capacity.DRAConsumableCapacityEnable: {str(consumable).lower()}",
    ]
    return "\n".join(lines) + "\n"


def claim(name: str, count: int, **capacity: str) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count}
    if capacity:
        request["capacity"] = {"requests": capacity}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
    }


def pod(name: str, claim_name: str, created: int) -> dict[str, Any]:
    obj = build_pod("ns1", name, "", "1", "1Gi", f"{name}-pg", created=created)
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return obj


def case(config: str, capability: dict[str, str], claims: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Case:
    return Case(
        "dra quota",
        config,
        nodes=[build_node("n1", "16", "64Gi", "20")],
        pods=pods,
        groups=[build_pod_group(f"{p['metadata']['name']}-pg", "ns1", "team", 1) for p in pods],
        queues=[build_queue("team", capability=capability)],
        claims=claims,
    )


def test_pods_sharing_a_claim_hold_it_once(apiserver: ApiServer) -> None:
    pods = [pod("a", "shared", 1), pod("b", "shared", 2), pod("c", "own", 3)]
    got = run_live(
        apiserver,
        case(conf(False), {"deviceclass/gpu.example.com": "2"}, [claim("shared", 2), claim("own", 1)], pods),
    )
    assert got.bound == {"ns1/a": "n1", "ns1/b": "n1"}  # the shared claim's 2 devices once; c would be a third
    assert got.reasons["c"] == ["allocate: queue team would exceed its capability"]


@pytest.mark.parametrize(("consumable", "bound"), [(True, ["ns1/a"]), (False, ["ns1/a", "ns1/b"])])
def test_a_consumable_capacity_caps_the_claims_only_when_its_flag_is_on(
    apiserver: ApiServer, consumable: bool, bound: list[str]
) -> None:
    capability = {"deviceclass/gpu.example.com": "8", "memory.deviceclass/gpu.example.com": "40Gi"}
    claims = [claim("first", 2, memory="16Gi"), claim("second", 1, memory="16Gi")]  # 32Gi, then 16Gi more
    got = run_live(apiserver, case(conf(consumable), capability, claims, [pod("a", "first", 1), pod("b", "second", 2)]))
    assert sorted(got.bound) == bound


def test_with_the_flag_off_the_queues_dra_keys_limit_nothing(apiserver: ApiServer) -> None:
    got = run_live(
        apiserver,
        case(conf(False, enabled=False), {"deviceclass/gpu.example.com": "1"}, [claim("big", 4)], [pod("a", "big", 1)]),
    )
    assert got.bound == {"ns1/a": "n1"}


def test_the_queue_status_names_the_devices_its_bound_pods_claims_hold() -> None:
    cache = ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock()))
    cache.on_node("ADDED", node_object("n1"))
    cache.on_queue("ADDED", build_queue("team", capability={"deviceclass/gpu.example.com": "4"}))
    for made in (claim("shared", 2, memory="16Gi"), claim("own", 1, memory="8Gi")):
        cache.on_dra(CLAIMS)("ADDED", made)
    bound = []
    for i, (name, claim_name) in enumerate((("a", "shared"), ("b", "shared"), ("c", "own"))):
        obj = pod(name, claim_name, i)
        obj["metadata"]["uid"] = f"uid-{name}"
        obj["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "team"
        obj["spec"]["nodeName"], obj["status"] = "n1", {"phase": "Running"}
        cache.on_pod("ADDED", obj)
        bound.append(obj)
    allocated = cache.queue_statuses()["team"]["allocated"]
    assert allocated["deviceclass/gpu.example.com"] == "3"  # the shared claim's 2 once, and 1
    assert allocated["memory.deviceclass/gpu.example.com"] == "40Gi"  # 2 x 16Gi + 8Gi
    cache.on_pod("DELETED", bound[0])
    assert cache.queue_statuses()["team"]["allocated"]["deviceclass/gpu.example.com"] == "3"  # b still uses it
    cache.on_pod("DELETED", bound[1])
    assert cache.queue_statuses()["team"]["allocated"]["deviceclass/gpu.example.com"] == "1"
    cache.on_pod("DELETED", bound[2])
    assert "deviceclass/gpu.example.com" not in cache.queue_statuses()["team"]["allocated"]
