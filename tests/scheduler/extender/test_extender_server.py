"""The extender's server against the embedded API server, called over HTTP as kube-scheduler calls it
(`KubeSchedulerCaller`): both node forms (nodeCacheCapable on and off) give the same answers, a
malformed body is refused with 400 and the server goes on serving, a restart rebuilds every booking
from the pods' assignments, and of two replicas only the holder of the Lease serves: the standby is
not ready, answers every verb with an error, and once it takes over it sees what the first bound."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.scheduler.build import AssignmentKeys, ExtenderConfig, LeaderElection, SchedulerConfig, build_extender
from runtimekit.scheduler.cache.objects import assignment_of
from runtimekit.scheduler.extender.caller import ExtenderCallError, KubeSchedulerCaller
from runtimekit.scheduler.extender.server import ExtenderServer
from scheduler.fake_api import P
from scheduler.helpers import gpu_node

PODS = "/api/v1/namespaces/default/pods"
RES = P.resources


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(kube: KubeHttp, election: LeaderElection | None = None, serve: bool = True) -> ExtenderServer:
    config = ExtenderConfig(
        SchedulerConfig(
            kube=kube,
            protocol=P,
            keys=AssignmentKeys(required=False),  # unsigned: no device plugin checks these assignments
            leader_election=election or LeaderElection(),
        ),
        listen="127.0.0.1:0",
    )
    server = build_extender(config).start()
    if serve:
        assert server.serving(15)
    return server


def caller(server: ExtenderServer, node_cache_capable: bool = True) -> KubeSchedulerCaller:
    return KubeSchedulerCaller(f"http://127.0.0.1:{server.port}/lj-runtimekit", node_cache_capable)


def pod(name: str, limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": limits, "requests": {"cpu": "1"}}}
            ],
        },
    }


def create(kube: KubeHttp, server: ExtenderServer, name: str, limits: dict[str, Any]) -> dict[str, Any]:
    """A pod created, once the extender's informer has it."""
    created: dict[str, Any] = kube.post(PODS, pod(name, limits))
    uid = created["metadata"]["uid"]
    wait_for(lambda: server.term is not None and server.term.live.queue.get(uid), what=f"{name} seen")
    return created


def nodes(kube: KubeHttp) -> list[dict[str, Any]]:
    return kube.list("/api/v1/nodes")[0]


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, body


def test_both_node_forms_give_the_same_answers_and_bind_with_the_assignment(kube: KubeHttp) -> None:
    for name in ("n1", "n2"):
        kube.post("/api/v1/nodes", gpu_node(name, 2))
    server = start(kube)
    names_caller, objects_caller = caller(server), caller(server, node_cache_capable=False)
    try:
        whole = create(kube, server, "whole", {RES.gpu: 2})
        assert names_caller.schedule(whole, nodes(kube)) is not None
        share = create(kube, server, "share", {RES.core: 25, RES.memory: 20})
        by_names, by_objects = names_caller.filter(share, nodes(kube)), objects_caller.filter(share, nodes(kube))
        assert by_names == by_objects
        assert len(by_names.nodes) == 1
        assert names_caller.prioritize(share, nodes(kube)) == objects_caller.prioritize(share, nodes(kube))
        objects_caller.bind(share, by_names.nodes[0])
        stored = kube.get(f"{PODS}/share")
        assignment = assignment_of(stored, P)
        assert assignment is not None
        ((gpu,),) = assignment.containers.values()
        assert (gpu.core_milli, gpu.memory_mib) == (250, 20 * 1024)
        assert stored["spec"]["nodeName"] == by_names.nodes[0]
        events = kube.get("/api/v1/namespaces/default/events")["items"]
        assert [e for e in events if e["reason"] == "Scheduled"] == []  # kube-scheduler writes those
    finally:
        names_caller.close()
        objects_caller.close()
        server.stop()


@pytest.mark.parametrize(
    ("verb", "body", "status"),
    [
        pytest.param("filter", b"{", 400, id="filter-truncated"),
        pytest.param("prioritize", b'{"Pod":{}}', 400, id="prioritize-no-nodes"),
        pytest.param("bind", b'{"PodUID":1}', 400, id="bind-bad-type"),
        pytest.param("preempt", b"[1,2]", 400, id="preempt-array"),
        pytest.param("unknown", b"{}", 404, id="unknown-verb"),
    ],
)
def test_a_malformed_body_is_refused_with_a_message_and_the_server_goes_on(
    kube: KubeHttp, verb: str, body: bytes, status: int
) -> None:
    kube.post("/api/v1/nodes", gpu_node("n1", 2))
    server = start(kube)
    call = caller(server)
    try:
        got, text = call.post(verb, body)
        assert got == status
        assert text.strip()
        shared = create(kube, server, "p", {RES.gpu: 1})
        assert call.schedule(shared, nodes(kube)) == "n1"  # the same connection goes on
        status_, metrics = get(server.port, "/metrics")
        assert status_ == 200
        assert b"runtimekit_extender_requests_total" in metrics
    finally:
        call.close()
        server.stop()


def test_a_restart_rebuilds_every_booking_from_the_pods(kube: KubeHttp) -> None:
    kube.post("/api/v1/nodes", gpu_node("n1", 2))
    first = start(kube)
    call = caller(first)
    try:
        for name, limits in (("a", {RES.core: 50, RES.memory: 40}), ("b", {RES.gpu: 1})):
            assert call.schedule(create(kube, first, name, limits), nodes(kube)) == "n1"
        assert first.term is not None
        booked = first.term.live.cache.booked()
    finally:
        call.close()
        first.stop()
    second = start(kube)
    call = caller(second)
    try:
        assert second.term is not None
        assert second.term.live.cache.booked() == booked
        late = create(kube, second, "late", {RES.core: 60, RES.memory: 10})
        assert call.filter(late, nodes(kube)).unresolvable == {}
        assert "n1" in call.filter(late, nodes(kube)).failed  # 50 % is left on the shared GPU, none on the other
        small = create(kube, second, "small", {RES.core: 50, RES.memory: 40})
        assert call.schedule(small, nodes(kube)) == "n1"
        assert assignment_of(kube.get(f"{PODS}/small"), P) is not None
    finally:
        call.close()
        second.stop()


def test_only_the_leader_serves_and_a_new_leader_sees_what_the_first_bound(kube: KubeHttp) -> None:
    kube.post("/api/v1/nodes", gpu_node("n1", 1))

    def election(identity: str) -> LeaderElection:
        return LeaderElection(True, "default", "extender", identity, 2.0, 1.2, 0.1)

    leader = start(kube, election("a"))
    standby = start(kube, election("b"), serve=False)
    to_leader, to_standby = caller(leader), caller(standby)
    try:
        assert get(leader.port, "/readyz")[0] == 200
        status, why = get(standby.port, "/readyz")
        assert status == 503
        assert b"standby" in why
        first = kube.post(PODS, pod("first", {RES.core: 60, RES.memory: 10}))
        with pytest.raises(ExtenderCallError, match="standby"):
            to_standby.filter(first, nodes(kube))
        with pytest.raises(ExtenderCallError, match="code 503"):
            to_standby.prioritize(first, nodes(kube))
        with pytest.raises(ExtenderCallError, match="standby"):
            to_standby.bind(first, "n1")
        wait_for(lambda: leader.term is not None and leader.term.live.queue.get(first["metadata"]["uid"]), what="seen")
        assert to_leader.schedule(first, nodes(kube)) == "n1"
        leader.stop()  # releases the Lease
        assert standby.serving(15)
        assert get(standby.port, "/readyz")[0] == 200
        second = create(kube, standby, "second", {RES.core: 60, RES.memory: 10})
        assert to_standby.filter(second, nodes(kube)).nodes == []  # the first holds 60 % of the one GPU
        third = create(kube, standby, "third", {RES.core: 40, RES.memory: 10})
        assert to_standby.schedule(third, nodes(kube)) == "n1"
    finally:
        to_leader.close()
        to_standby.close()
        standby.stop()
        leader.stop()
