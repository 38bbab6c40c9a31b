"""Every pod a session leaves waiting says why, in the paths where none was written: a pod group that
enqueue did not admit, a gang member placed and given back because another member hit its queue's
cap, and the placed members of a gang held (pipelined) for its SLA; and, against the embedded API
server, a pod group that cannot be admitted, and the pods of a session that fails as a whole, get
PodScheduled=False with the reason at once and are not tried again in a loop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.model import NodeCapacity, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, NodeMeta, QueueInfo, Resources
from runtimekit.scheduler.framework.interfaces import Plugin, SessionView
from scheduler.helpers import gpu_node, job_of, whole

P = KitProtocol.default()
TIERS = """
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: overcommit
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
"""
CONF = 'actions: "enqueue, allocate, backfill"\ntiers:' + TIERS
SLA_FIRST = 'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: sla\n' + TIERS


def cache_of(*jobs: JobInfo, queues: tuple[QueueInfo, ...] = ()) -> StaticCache:
    node = (
        NodeInventory.simulated("n1", "T4", 2, 16384),
        NodeCapacity(64000, 256 << 30, 110),
        NodeMeta(NodeName("n1"), {}, (), False, "T4"),
    )
    cache = StaticCache([node], queues)
    for job in jobs:
        cache.add_job(job)
    return cache


def reasons(conf: str, cache: StaticCache, now: float = 0.0) -> dict[str, str]:
    cache.now = now
    Framework(parse_conf(conf), builtin_registry(), BuildContext()).run_once(cache)
    return {str(key): errors.message for key, errors in cache.unschedulable.items()}


def test_a_pod_group_enqueue_does_not_admit_says_why() -> None:
    big = job_of("big", whole(1))
    big.phase, big.has_podgroup, big.min_resources = "Pending", True, Resources(1000, 0, 100_000)
    got = reasons(CONF, cache_of(big))
    assert got == {
        "big-0": "enqueue: pod group big is Pending (not admitted to queue default): its minResources do not fit "
        "what the queue may take or the cluster has idle"
    }


def test_a_gang_member_given_back_for_its_sibling_says_why() -> None:
    gang = job_of("g", whole(1), whole(1), min_member=2, queue="capped")
    capped = QueueInfo("capped", capability=Resources(64000, 10**6, 1000))  # one GPU
    got = reasons(CONF, cache_of(gang, queues=(capped,)))
    assert got["g-1"] == "allocate: queue capped would exceed its capability"
    assert got["g-0"] == (
        "gang: the gang could place only 1/2 of its tasks; allocate: queue capped would exceed its capability"
    )


def test_the_members_of_a_gang_held_for_its_sla_say_why() -> None:
    gang = job_of("g", whole(1), whole(1), whole(1), min_member=3)
    gang.waiting_time = 60.0  # overdue below: sla keeps what fits (pipelined) instead of giving it back
    got = reasons(SLA_FIRST, cache_of(gang), now=3600.0)
    placed = {k: v for k, v in got.items() if v.startswith("gang: placed on n1")}
    assert len(placed) == 2
    assert all(v.endswith("waits for its gang to be ready (2/3 placed)") for v in placed.values())
    assert len(got) == 3  # the third says why it does not fit


def test_a_pod_of_an_overused_queue_says_so_when_a_node_could_take_it() -> None:
    """Queue a holds its half of the GPUs; b's pod fits nowhere (its CPU), so a GPU stays idle: a's pod
    could take it and waits for its queue alone (Volcano skips the overused queue)."""
    running = job_of("run", whole(1, cpu=0), queue="a")
    cache = cache_of(running, queues=(QueueInfo("a"), QueueInfo("b")))
    assert reasons(CONF, cache) == {}
    cache.add_job(job_of("more", whole(1, cpu=0), queue="a"))
    cache.add_job(job_of("big", whole(1, cpu=100_000), queue="b"))
    got = reasons(CONF, cache)
    assert got["more-0"] == "allocate: queue a is overused (it holds its deserved share)"
    assert got["big-0"].startswith("0/1 nodes are available: 1 Insufficient cpu")


def test_a_pod_of_an_overused_queue_no_node_could_take_says_the_nodes_reason() -> None:
    """One queue fills the cluster's GPUs with pods asking no CPU: it is overused, and the next pod reads
    why no node takes it."""
    cache = cache_of(job_of("run", whole(2, cpu=0)))
    assert reasons(CONF, cache) == {}
    cache.add_job(job_of("more", whole(1, cpu=0)))
    assert reasons(CONF, cache) == {"more-0": "0/1 nodes are available: 1 too few whole free GPUs."}


# -- live, through the embedded API server ---------------------------------------------------------
@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def test_a_pod_group_that_cannot_be_admitted_says_why_and_is_not_retried_in_a_loop(http: KubeHttp) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "huge", "namespace": "default"},
        "spec": {"minMember": 1, "minResources": {P.resources.gpu: "64"}},
    }
    http.post("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", group)
    config = SchedulerConfig(
        kube=http, conf=parse_conf(CONF), protocol=P, keys=AssignmentKeys(required=False), period=0.02
    )
    scheduler = build_scheduler(config).start()
    try:
        assert scheduler.synced(10)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "waits",
                "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": "huge"},
            },
            "spec": {
                "schedulerName": P.scheduler_name,
                "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {P.resources.gpu: 1}}}],
            },
        }
        http.post("/api/v1/namespaces/default/pods", pod)

        def condition() -> dict[str, Any] | None:
            got = http.get("/api/v1/namespaces/default/pods/waits")["status"].get("conditions") or []
            return next((c for c in got if c["type"] == "PodScheduled"), None)

        scheduled = wait_for(condition, timeout=5, what="a PodScheduled condition on the waiting pod")
        assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
        assert "pod group huge is Pending (not admitted to queue default)" in scheduled["message"]
        sessions = scheduler.sessions
        time.sleep(1.0)
        assert scheduler.sessions - sessions < 10  # before: a session every 20 ms, trying it again and again
    finally:
        scheduler.stop()


class Broken(Plugin):
    """A plugin that fails every session as it opens (a bug, or an object nobody foresaw)."""

    name = "broken"

    def on_session_open(self, ssn: SessionView) -> None:
        raise RuntimeError("the plugin's own bug")


def test_pods_of_a_session_that_fails_as_a_whole_say_why_and_back_off(http: KubeHttp) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    registry = builtin_registry()
    registry.register_plugin("broken", lambda arguments, context: Broken())
    conf = parse_conf(CONF.replace("  - name: gang\n", "  - name: gang\n  - name: broken\n"), "<test>")
    config = SchedulerConfig(
        kube=http, conf=conf, registry=registry, protocol=P, keys=AssignmentKeys(required=False), period=0.02
    )
    scheduler = build_scheduler(config).start()
    try:
        assert scheduler.synced(10)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "stuck", "namespace": "default"},
            "spec": {
                "schedulerName": P.scheduler_name,
                "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {P.resources.gpu: 1}}}],
            },
        }
        http.post("/api/v1/namespaces/default/pods", pod)

        def condition() -> dict[str, Any] | None:
            got = http.get("/api/v1/namespaces/default/pods/stuck")["status"].get("conditions") or []
            return next((c for c in got if c["type"] == "PodScheduled"), None)

        scheduled = wait_for(condition, timeout=5, what="a PodScheduled condition on the waiting pod")
        assert scheduled["status"] == "False"
        assert scheduled["message"] == "scheduling session failed: RuntimeError: the plugin's own bug"
        sessions = scheduler.sessions
        time.sleep(1.0)
        assert scheduler.sessions - sessions < 5  # backing off (1 s, then 2 s, ...), not a session every 20 ms
    finally:
        scheduler.stop()
