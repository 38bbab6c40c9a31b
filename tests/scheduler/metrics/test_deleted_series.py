"""A deleted Queue's and a deleted PodGroup's series leave the scheduler's /metrics at once, with no
new pod and no session in between (they stayed until the next session, which only a new pod starts)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, Endpoints, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
PODS = "/api/v1/namespaces/default/pods"
# no enqueue: with it, the PodGroup left without pods would wake a session of its own (Volcano's
# enqueue of pod-less groups), and this test shows the series go with no session at all
CONF = """
actions: "allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: gpushare}]
"""
GONE = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


@pytest.fixture
def scheduler(http: KubeHttp) -> Iterator[Scheduler]:
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(CONF),
        protocol=P,
        keys=AssignmentKeys(required=False),
        endpoints=Endpoints(metrics="127.0.0.1:0"),
        period=0.02,
    )
    started = build_scheduler(config).start()
    assert started.synced(10)
    yield started
    started.stop()


def queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {}}


def pod(name: str, annotations: dict[str, str], gpus: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {"limits": {P.resources.gpu: gpus}, "requests": {"cpu": "1"}},
                }
            ],
        },
    }


def quiet(scheduler: Scheduler, settle: float = 0.3) -> int | None:
    """The scheduler's session count when nothing is pending and no session ran for `settle` seconds."""
    if len(scheduler.queue):
        return None
    before = scheduler.sessions
    time.sleep(settle)
    return before if scheduler.sessions == before and not len(scheduler.queue) else None


def labelled(text: str, label: str, value: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(rf'[{{,]{label}="{re.escape(value)}"', line)]


def test_the_series_of_deleted_queues_and_pod_groups_go_without_a_new_pod(http: KubeHttp, scheduler: Scheduler) -> None:
    http.post("/api/v1/nodes", gpu_node("n1", 2))
    for i in range(4):
        http.post(f"{VOLCANO}/queues", queue(f"team-{i}"))
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "trainer", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "team-1"},
    }
    http.post(f"{VOLCANO}/namespaces/default/podgroups", group)
    http.post(PODS, pod("runs", {"scheduling.volcano.sh/queue-name": "team-0"}))
    http.post(PODS, pod("too-big", {"scheduling.k8s.io/group-name": "trainer"}, gpus=64))
    metrics = f"http://{scheduler.endpoints[0].address}/metrics"

    def scrape() -> str:
        return httpx2.get(metrics, timeout=10).text

    def seen() -> str | None:
        text = scrape()
        every_queue = all(labelled(text, "queue_name", f"team-{i}") for i in range(4))
        return text if every_queue and labelled(text, "job_id", "trainer") else None

    before = wait_for(seen, what="series of every queue and of the failing pod group")
    assert len(labelled(before, "queue_name", "team-3")) >= 10  # allocated, deserved, share, weight, ...
    http.delete(f"{PODS}/too-big", GONE)
    # the pod's deletion may start a session of its own, and the pods' and the PodGroups' watches are
    # two streams: the counter is read once the scheduler holds nothing pending and has gone quiet
    sessions = wait_for(lambda: quiet(scheduler), what="the scheduler idle with nothing pending")
    http.delete(f"{VOLCANO}/namespaces/default/podgroups/trainer", GONE)
    for i in (1, 2, 3):
        http.delete(f"{VOLCANO}/queues/team-{i}", GONE)

    def gone() -> str | None:
        text = scrape()
        left = [line for i in (1, 2, 3) for line in labelled(text, "queue_name", f"team-{i}")]
        left += labelled(text, "job_id", "trainer") + labelled(text, "job_name", "trainer")
        return None if left else text

    after = wait_for(gone, timeout=5, what="the deleted queues' and pod group's series gone")
    assert labelled(after, "queue_name", "team-0")  # the queue that is still there keeps its series
    assert scheduler.sessions == sessions  # no session ran: nothing was pending
