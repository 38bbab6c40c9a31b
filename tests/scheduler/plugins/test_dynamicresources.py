"""`dynamicresources` without a scheduler around it: allocations reserved but not yet written count
as in use for the next pod (kube's in-flight allocations), PreBind writes allocation and reservedFor,
and a failed bind's Unreserve undoes exactly what PreBind wrote."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from runtimekit.kube.objects import ResourceClaim
from runtimekit.model import NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.info import NodeMeta, TaskInfo
from runtimekit.scheduler.framework.status import Code
from runtimekit.scheduler.framework.values import DeviceChoice
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem.dra import DraCatalog
from runtimekit.scheduler.plugins.dra import DynamicResources

P = KitProtocol.default()
NO_LEDGER = SimpleNamespace(row=lambda _: 0, has_node=lambda _: False)  # no device-plugin shares booked
DRIVER = "gpu.runtimekit.aliyun.com"
CLASS = {"metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
SLICE = {
    "metadata": {"name": "n1"},
    "spec": {
        "driver": DRIVER,
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"core": {"value": "100"}}}],
    },
}


def claim(name: str, core: str, **status: Any) -> ResourceClaim:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "capacity": {"requests": {"core": core}}}}
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [request]}}}
    if status:
        body["status"] = status
    return cast(ResourceClaim, body)


def pod_task(name: str, claim_name: str) -> TaskInfo:
    pod = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}], "containers": [{"name": "c"}]},
    }
    task = task_from_pod(cast(Any, pod), P)
    task.node = NodeName("n1")
    return task


def view(*claims: ResourceClaim) -> SessionView:
    keys = {f"default/{c['metadata']['name']}": c for c in claims}
    catalog = DraCatalog(keys, {DRIVER: cast(Any, CLASS)}, (cast(Any, SLICE),), 1)
    snapshot = SimpleNamespace(dra=catalog, meta=[NodeMeta(NodeName("n1"))])
    return cast(SessionView, SimpleNamespace(snapshot=snapshot, table=NO_LEDGER))


class Claims:
    """A ClaimAccess over a dict, as the API server would store the writes."""

    def __init__(self, *claims: ResourceClaim) -> None:
        self.stored = {f"default/{c['metadata']['name']}": copy.deepcopy(c) for c in claims}

    def claim(self, key: str) -> ResourceClaim | None:
        return copy.deepcopy(self.stored.get(key))

    def update_status(self, updated: ResourceClaim) -> ResourceClaim:
        self.stored[f"default/{updated['metadata']['name']}"] = copy.deepcopy(updated)
        return updated


ROWS = np.array([0], np.int64)


def test_a_reserved_allocation_counts_before_it_is_written() -> None:
    plugin = DynamicResources()
    first, second = claim("a", "70"), claim("b", "40")
    ssn = view(first, second)
    task = pod_task("p", "a")
    assert plugin.predicate(task, ROWS, ssn).passed.tolist() == [True]
    assert plugin.reserve(task, DeviceChoice(), ssn).ok
    verdict = plugin.predicate(pod_task("q", "b"), ROWS, ssn)
    assert verdict.passed.tolist() == [False]  # 70 in flight + 40 > 100
    plugin.unreserve(task)
    assert plugin.predicate(pod_task("q", "b"), ROWS, ssn).passed.tolist() == [True]


def test_prebind_writes_and_a_failed_bind_undoes_only_its_own_write() -> None:
    plugin = DynamicResources()
    other = {"resource": "pods", "name": "other", "uid": "uid-other"}
    fresh = claim("a", "30")
    ssn = view(fresh)
    task = pod_task("p", "a")
    assert plugin.reserve(task, DeviceChoice(), ssn).ok
    access = Claims(fresh)
    assert plugin.pre_bind(Binding(task, NodeName("n1"), DeviceChoice(), claims=access)).ok
    written = access.stored["default/a"]["status"]
    assert written["allocation"]["devices"]["results"][0]["consumedCapacity"] == {"core": "30"}
    assert written["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    plugin.unreserve(task)  # the bind failed
    assert access.stored["default/a"]["status"] == {"reservedFor": []}
    # a claim allocated and used by another pod keeps both when this pod's bind fails
    shared = claim("s", "30", allocation=written["allocation"], reservedFor=[other])
    ssn = view(shared)
    task = pod_task("p2", "s")
    assert plugin.reserve(task, DeviceChoice(), ssn).ok
    access = Claims(shared)
    assert plugin.pre_bind(Binding(task, NodeName("n1"), DeviceChoice(), claims=access)).ok
    assert len(access.stored["default/s"]["status"]["reservedFor"]) == 2
    plugin.unreserve(task)
    assert access.stored["default/s"]["status"] == {"allocation": written["allocation"], "reservedFor": [other]}


def test_pods_without_claims_pass_and_bad_claims_are_unresolvable() -> None:
    plugin = DynamicResources()
    plain = pod_task("plain", "x")
    assert plain.pod is not None
    plain.pod["spec"]["resourceClaims"] = []
    assert plugin.pre_predicate(plain).code is Code.SKIP  # no mask is made for it
    assert plugin.pre_predicate(pod_task("p", "nope")).code is Code.SUCCESS
    missing = plugin.predicate(pod_task("p", "nope"), ROWS, view())
    assert missing.passed.tolist() == [False]
    assert missing.reasons == [('resourceclaim "nope" not found', [True])]
    bad = claim("bad", "10")
    bad["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "no-such-class"
    unknown = plugin.predicate(pod_task("p", "bad"), ROWS, view(bad))
    assert "no-such-class" in unknown.reasons[0][0]
    assert cast(Any, unknown.unresolvable).tolist() == [True]


def test_a_share_packs_onto_a_device_already_shared_not_the_first_free_one() -> None:
    two = copy.deepcopy(SLICE)
    free = copy.deepcopy(two["spec"]["devices"][0])
    two["spec"]["devices"] = [{**free, "name": "gpu-0"}, {**free, "name": "gpu-1"}]
    used = {"driver": DRIVER, "pool": "n1", "device": "gpu-1", "request": "gpu", "shareID": "x"}
    held = claim("held", "30", allocation={"devices": {"results": [{**used, "consumedCapacity": {"core": "30"}}]}})
    new = claim("new", "30")
    catalog = DraCatalog({"default/held": held, "default/new": new}, {DRIVER: cast(Any, CLASS)}, (cast(Any, two),), 1)
    snapshot = SimpleNamespace(dra=catalog, meta=[NodeMeta(NodeName("n1"))])
    ssn = cast(SessionView, SimpleNamespace(snapshot=snapshot, table=NO_LEDGER))
    plugin = DynamicResources()
    task = pod_task("p", "new")
    assert plugin.reserve(task, DeviceChoice(), ssn).ok
    access = Claims(new)
    assert plugin.pre_bind(Binding(task, NodeName("n1"), DeviceChoice(), claims=access)).ok
    assert access.stored["default/new"]["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"


def test_a_written_allocation_stops_counting_once_its_claim_is_deleted_or_deallocated() -> None:
    """PreBind's allocation counts in flight until a session's claims show it, or show the claim gone
    or freed: a pod bound and deleted before any session opened (sessions open only when there is
    work) must not leave its claim's devices held for ever (the e2e gang of two that never placed)."""
    plugin = DynamicResources()
    first, other = claim("a", "70"), claim("b", "40")
    task = pod_task("p", "a")
    plugin.on_session_open(view(first, other))
    assert plugin.reserve(task, DeviceChoice(), view(first, other)).ok
    assert plugin.pre_bind(Binding(task, NodeName("n1"), DeviceChoice(), claims=Claims(first))).ok
    # the pod went and the claim controller deleted its claim: the next session sees it gone
    plugin.on_session_open(view(other))
    assert plugin.predicate(pod_task("q", "b"), ROWS, view(other)).passed.tolist() == [True]

    # a claim named by the pod is deallocated instead: the first session may have taken its snapshot
    # before the write, so the allocation counts there; the second one's snapshot came after the write
    task = pod_task("p2", "a")
    assert plugin.reserve(task, DeviceChoice(), view(first, other)).ok
    assert plugin.pre_bind(Binding(task, NodeName("n1"), DeviceChoice(), claims=Claims(first))).ok
    plugin.on_session_open(view(first, other))
    assert plugin.predicate(pod_task("q", "b"), ROWS, view(first, other)).passed.tolist() == [False]  # 70 + 40
    plugin.on_session_open(view(first, other))
    assert plugin.predicate(pod_task("q", "b"), ROWS, view(first, other)).passed.tolist() == [True]
