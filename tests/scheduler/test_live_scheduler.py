"""The live scheduler against the embedded API server, over HTTP: informers, binding with the
assignment annotation, events and conditions, gang scheduling with PodGroups, a restart
mid-stream that books nothing twice, and leader election between two schedulers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, LeaderElection, SchedulerConfig, build_scheduler
from runtimekit.scheduler.cache.objects import assignment_of
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""


def pod(name: str, limits: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": limits, "requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(http: KubeHttp, election: LeaderElection | None = None) -> Scheduler:
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(CONF),
        protocol=P,
        keys=AssignmentKeys(required=False),  # unsigned: no device plugin checks these assignments
        leader_election=election or LeaderElection(),
        period=0.02,
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def bound(http: KubeHttp, name: str) -> str | None:
    return http.get(f"/api/v1/namespaces/default/pods/{name}")["spec"].get("nodeName")


def test_pods_bind_with_assignments_events_and_conditions(http: KubeHttp) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    scheduler = start(http)
    try:
        http.post("/api/v1/namespaces/default/pods", pod("frac", {P.resources.core: 25, P.resources.memory: 20}))
        http.post("/api/v1/namespaces/default/pods", pod("whole", {P.resources.gpu: 1}))
        http.post("/api/v1/namespaces/default/pods", pod("toobig", {P.resources.gpu: 4}))
        wait_for(lambda: bound(http, "frac") and bound(http, "whole"), what="binding")
        frac = http.get("/api/v1/namespaces/default/pods/frac")
        assignment = assignment_of(frac, P)
        assert assignment is not None
        (share,) = assignment.containers["main"]
        assert (share.core_milli, share.memory_mib) == (250, 20 * 1024)
        conditions = {c["type"]: c["status"] for c in frac["status"].get("conditions", [])}
        assert conditions.get("PodScheduled") == "True"

        def failed() -> list[dict[str, Any]]:
            events = http.get("/api/v1/namespaces/default/events", {"fieldSelector": "involvedObject.name=toobig"})[
                "items"
            ]
            return [e for e in events if e["reason"] == "FailedScheduling"]

        (event,) = wait_for(failed, what="FailedScheduling event")
        assert event["message"] == "0/1 nodes are available: 1 too few whole free GPUs."
        big = http.get("/api/v1/namespaces/default/pods/toobig")
        cond = next(c for c in big["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")

        def scheduled() -> set[str]:  # events are written off the binding path, shortly after
            events = http.get("/api/v1/namespaces/default/events")["items"]
            return {e["involvedObject"]["name"] for e in events if e["reason"] == "Scheduled"}

        wait_for(lambda: scheduled() == {"frac", "whole"}, what="Scheduled events")
    finally:
        scheduler.stop()


def test_gang_binds_all_or_nothing(http: KubeHttp) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 3},
    }
    http.post("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", group)
    scheduler = start(http)
    try:
        member = {"scheduling.k8s.io/group-name": "g"}
        for i in range(3):
            http.post("/api/v1/namespaces/default/pods", pod(f"g{i}", {P.resources.gpu: 1}, member))
        time.sleep(1.0)
        assert [bound(http, f"g{i}") for i in range(3)] == [None, None, None]
        http.post("/api/v1/nodes", gpu_node("n2", 2))
        wait_for(lambda: all(bound(http, f"g{i}") for i in range(3)), what="the gang")
    finally:
        scheduler.stop()


def test_restart_mid_stream_books_nothing_twice(http: KubeHttp) -> None:
    for name in ("n1", "n2"):
        http.post("/api/v1/nodes", gpu_node(name, 2))
    first = start(http)
    for i in range(12):
        http.post("/api/v1/namespaces/default/pods", pod(f"p{i}", {P.resources.core: 30}))
    wait_for(lambda: sum(1 for i in range(12) if bound(http, f"p{i}")) >= 4, what="some binds")
    first.stop()
    second = start(http)
    try:
        for i in range(12, 16):
            http.post("/api/v1/namespaces/default/pods", pod(f"p{i}", {P.resources.core: 30}))
        wait_for(lambda: all(bound(http, f"p{i}") for i in range(12)), what="all that fit")
        time.sleep(0.5)
        pods = http.list("/api/v1/namespaces/default/pods")[0]
        per_gpu: dict[str, int] = {}
        for item in pods:
            assignment = assignment_of(item, P)
            if item["spec"].get("nodeName") and assignment is not None:
                for share in assignment.shares():
                    per_gpu[share.uuid] = per_gpu.get(share.uuid, 0) + share.core_milli
        assert per_gpu
        assert max(per_gpu.values()) <= 1000
        assert sum(1 for item in pods if item["spec"].get("nodeName")) == 12  # 4 GPUs x 3 shares of 30 %
        booked = second.cache.booked()
        assert len(booked) == 12
    finally:
        second.stop()


def test_only_the_leader_binds_and_a_standby_takes_over(http: KubeHttp) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 4))
    a = start(http, LeaderElection(True, "default", identity="a", lease_seconds=2.0, renew_every=0.3))
    wait_for(a.elector.leading.is_set, what="a leads")  # type: ignore[union-attr]
    b = start(http, LeaderElection(True, "default", identity="b", lease_seconds=2.0, renew_every=0.3))
    try:
        http.post("/api/v1/namespaces/default/pods", pod("x", {P.resources.gpu: 1}))
        wait_for(lambda: bound(http, "x"), what="x")
        assert not b.leading
        assert b.sessions == 0
        a.stop()  # releases the lease
        wait_for(b.elector.leading.is_set, timeout=20, what="b takes over")  # type: ignore[union-attr]
        http.post("/api/v1/namespaces/default/pods", pod("y", {P.resources.gpu: 1}))
        wait_for(lambda: bound(http, "y"), what="y")
    finally:
        b.stop()


def test_packfrag_places_pods_in_the_live_scheduler_from_what_it_learned(http: KubeHttp) -> None:
    """The policy asked for by annotation places share pods and records itself in the assignment;
    it learns its workload from these pods, nothing else (docs/results/better-than-fgd.md)."""
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    http.post("/api/v1/nodes", gpu_node("n2", 2))
    scheduler = start(http)
    try:
        names = [f"pf-{i}" for i in range(5)]
        for name in names:
            limits = {P.resources.core: 30, P.resources.memory: 10}
            http.post("/api/v1/namespaces/default/pods", pod(name, limits, {P.annotations.policy: "packfrag"}))
        wait_for(lambda: all(bound(http, n) for n in names), what="binding")
        assignments = [assignment_of(http.get(f"/api/v1/namespaces/default/pods/{n}"), P) for n in names]
        assert all(a is not None and a.policy == "packfrag" for a in assignments)
        per_gpu: dict[tuple[str, str], int] = {}
        for a in assignments:
            assert a is not None
            for share in a.containers["main"]:
                per_gpu[(a.node, share.uuid)] = per_gpu.get((a.node, share.uuid), 0) + share.core_milli
        assert all(milli <= 1000 for milli in per_gpu.values())  # never over-committed
        # 30 % shares: a GPU at 1000 or 700 free loses 300 usable milli to one, a GPU at 400 loses all 400,
        # so two go on each GPU before the next is opened: 3 GPUs for 5 pods (spreading would use all 4)
        assert sorted(per_gpu.values()) == [300, 600, 600]
    finally:
        scheduler.stop()
