"""A scheduler's cold start: the informers list pods, PodGroups and Queues in any order, and what the
running pods hold is charged to their PodGroup's queue however the lists interleave (as Volcano's
cache charges a job's queue once its PodGroup is known); a scheduler that becomes leader runs its
first session at once, not at its next idle wake-up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.lease import LeaderElector
from runtimekit.scheduler.build import AssignmentKeys, LeaderElection, SchedulerConfig, build_scheduler
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.info import Resources
from runtimekit.scheduler.metrics.state import ClusterState
from runtimekit.scheduler.scheduling_queue import SchedulingQueue
from runtimekit.scheduler.server import Scheduler
from scheduler.fake_api import P, node_object, pod_object
from scheduler.helpers import gpu_node

NEVER = 3600.0  # an idle wake-up no test waits for: what runs, runs because it was woken


def group_object(name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 2, "queue": queue},
        "status": {"phase": "Running"},
    }


def running_pod(name: str, group: str) -> dict[str, Any]:
    pod = pod_object(name, {}, cpu="2", annotations={"scheduling.k8s.io/group-name": group})
    pod["spec"]["nodeName"] = "n1"
    pod["status"] = {"phase": "Running"}
    return pod


def allocated_cpu(cache: ClusterCache) -> dict[str, int]:
    """The `volcano_queue_allocated_milli_cpu` series as a scrape reads them."""
    families = {f.name: f for f in ClusterState(cache, P, lambda: {}).collect()}
    return {s.labels["queue_name"]: int(s.value) for s in families["volcano_queue_allocated_milli_cpu"].samples}


@pytest.mark.parametrize("group_first", [True, False], ids=["podgroup-listed-first", "pods-listed-first"])
def test_running_pods_are_charged_to_their_podgroups_queue_whatever_the_list_order(group_first: bool) -> None:
    cache = ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock()))
    cache.on_node("ADDED", node_object("n1"))
    for name in ("default", "team"):
        cache.on_queue(
            "ADDED",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1},
            },
        )
    pods = [running_pod(f"g-{i}", "g") for i in range(2)]
    if group_first:
        cache.on_podgroup("ADDED", group_object("g", "team"))
    for pod in pods:
        cache.on_pod("ADDED", pod)
    if not group_first:
        cache.on_podgroup("ADDED", group_object("g", "team"))
    assert cache.queue_allocated.get("default", Resources()).cpu == 0
    assert cache.queue_allocated["team"].cpu == 4000
    assert allocated_cpu(cache) == {"default": 0, "team": 4000}
    cache.on_pod("DELETED", pods[0])  # a pod that leaves is taken back from the queue it was charged to
    assert allocated_cpu(cache) == {"default": 0, "team": 2000}


def test_a_podgroup_that_changes_queue_or_goes_takes_its_running_pods_charges_along() -> None:
    cache = ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock()))
    cache.on_node("ADDED", node_object("n1"))
    cache.on_podgroup("ADDED", group_object("g", "team"))
    pods = [running_pod(f"g-{i}", "g") for i in range(2)]
    for pod in pods:
        cache.on_pod("ADDED", pod)
    cache.on_podgroup("MODIFIED", group_object("g", "other"))
    assert {q: r.cpu for q, r in cache.queue_allocated.items() if r.cpu} == {"other": 4000}
    cache.on_podgroup("DELETED", group_object("g", "other"))  # its pods fall back to their own queue: default
    assert {q: r.cpu for q, r in cache.queue_allocated.items() if r.cpu} == {"default": 4000}
    for pod in pods:
        cache.on_pod("DELETED", pod)
    assert all(r.is_empty for r in cache.queue_allocated.values())


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(http: KubeHttp, election: LeaderElection) -> Scheduler:
    conf = parse_conf(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: gpushare\n'
    )
    keys = AssignmentKeys(required=False)  # unsigned: no device plugin checks these assignments
    config = SchedulerConfig(
        kube=http, conf=conf, protocol=P, keys=keys, leader_election=election, period=0.02, idle_wakeup=NEVER
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def test_a_scheduler_that_becomes_leader_schedules_the_pods_that_waited_at_once(http: KubeHttp) -> None:
    """Pods that arrived while it stood by are scheduled by the first session of its term, which
    starts when it takes the Lease, not at its next idle wake-up (an hour here)."""
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    other = LeaderElector(http, P.scheduler_name, "default", "other", lease_seconds=60.0)
    assert other.step()
    scheduler = start(http, LeaderElection(True, "default", identity="me", lease_seconds=2.0, renew_every=0.2))
    try:
        container = {"name": "main", "image": "busybox", "resources": {"limits": {P.resources.gpu: 1}}}
        pod = {"metadata": {"name": "x"}, "spec": {"schedulerName": P.scheduler_name, "containers": [container]}}
        http.post("/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", **pod})
        wait_for(lambda: len(scheduler.queue) == 1, what="x waits in the standby's queue")
        assert scheduler.sessions == 0
        other.release()
        wait_for(lambda: http.get("/api/v1/namespaces/default/pods/x")["spec"].get("nodeName"), what="x bound")
        assert scheduler.sessions >= 1
    finally:
        scheduler.stop()
