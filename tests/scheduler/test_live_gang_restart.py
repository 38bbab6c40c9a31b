"""A gang left half bound by a scheduler that stopped mid-gang, against the embedded API server: the
scheduler started next completes the gang before the pods that compete with it for its GPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT
from runtimekit.scheduler.server import Scheduler
from scheduler.helpers import gpu_node

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
GROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"


def gpu_pod(name: str, group: str | None = None) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {P.resources.gpu: 1}, "requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url)
    yield client
    client.close()


def start(http: KubeHttp) -> Scheduler:
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(DEFAULT_CONF_TEXT),  # Volcano's tiers: priority, gang, conformance; drf, ...
        protocol=P,
        keys=AssignmentKeys(required=False),  # unsigned: no device plugin checks these assignments
        period=0.02,
    )
    scheduler = build_scheduler(config).start()
    assert scheduler.synced(10)
    return scheduler


def bound(http: KubeHttp, prefix: str) -> list[str]:
    pods = http.list(PODS)[0]
    return sorted(
        p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
    )


def test_a_gang_cut_short_by_a_restart_completes_before_its_competitors(http: KubeHttp) -> None:
    for name in ("n1", "n2"):
        http.post("/api/v1/nodes", gpu_node(name, 8))
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"minMember": 12},
    }
    http.post(GROUPS, group)
    first = start(http)
    try:
        for i in range(12):
            http.post(PODS, gpu_pod(f"train-{i}", "train"))
        wait_for(lambda: len(bound(http, "train-")) == 12, what="the gang bound by the first scheduler")
    finally:
        first.stop()
    # the state a scheduler stopped half way through the gang's binds leaves: 6 members bound, 6 not
    for i in range(6, 12):
        http.delete(f"{PODS}/train-{i}", {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    wait_for(lambda: len(http.list(PODS)[0]) == 6, what="the unbound members gone")
    for i in range(6, 12):
        http.post(PODS, gpu_pod(f"train-{i}", "train"))
    for i in range(8):  # competitors: one GPU each, 10 GPUs free, the gang needs 6 of them
        http.post(PODS, gpu_pod(f"other-{i}"))
    second = start(http)
    try:
        wait_for(lambda: len(bound(http, "train-")) == 12, timeout=20, what="the gang completed after the restart")
        wait_for(lambda: len(bound(http, "other-")) == 4, what="the competitors on what is left")
        time.sleep(0.5)
        assert len(bound(http, "other-")) == 4  # no GPU is booked twice
    finally:
        second.stop()
