"""End to end on the embedded cluster with its scheduler off: the extender (`runtimekit extender`'s server,
signing with the cluster's key) is driven through HTTP as kube-scheduler drives it (filter, prioritize,
bind) for share, whole-GPU, multi-GPU and MIG pods; the simulated kubelets admit them through the
device plugins, which accept the extender's signed assignments, and every container gets the GPUs (or
MIG slice) its assignment names."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, ExtenderConfig, SchedulerConfig, build_extender
from runtimekit.scheduler.extender.caller import KubeSchedulerCaller
from runtimekit.scheduler.extender.server import ExtenderServer

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
RES = P.resources
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(
        nodes=2, gpus_per_node=4, gpu_model="A100-80GB", mig_mode="0:dynamic", scheduler=False, controller=False
    )
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


@pytest.fixture(scope="module")
def extender(cluster: EmbeddedCluster) -> Iterator[ExtenderServer]:
    config = ExtenderConfig(
        SchedulerConfig(
            kube=cluster.http("extender"), protocol=cluster.protocol, keys=AssignmentKeys(cluster.assignment_keys)
        ),
        listen="127.0.0.1:0",
    )
    server = build_extender(config).start()
    assert server.serving(30)
    yield server
    server.stop()


def pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "resources": {"limits": limits, "requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


def seen(extender: ExtenderServer, uid: str) -> bool:
    """Whether the extender's informer has the pending pod (kube-scheduler's may see it first)."""
    return extender.term is not None and extender.term.live.queue.get(uid) is not None


def running(http: KubeHttp, name: str) -> dict[str, Any] | None:
    item: dict[str, Any] = http.get(f"{PODS}/{name}")
    return item if item["status"].get("phase") == "Running" else None


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "node-objects"])
def test_pods_scheduled_through_the_extender_run_on_their_gpus(
    cluster: EmbeddedCluster, extender: ExtenderServer, node_cache_capable: bool
) -> None:
    http = cluster.http("e2e")
    call = KubeSchedulerCaller(f"http://127.0.0.1:{extender.port}/lj-runtimekit", node_cache_capable)
    suffix = "n" if node_cache_capable else "o"
    asks = {
        f"share-{suffix}": {RES.core: "30", RES.memory: "20"},
        f"whole-{suffix}": {RES.gpu: "1"},
        f"multi-{suffix}": {RES.gpu: "2"},
        f"mig-{suffix}": {f"{RES.mig_prefix}3g.40gb": "1"},
    }
    try:
        nodes = http.list("/api/v1/nodes")[0]
        for name, limits in asks.items():
            created = http.post(PODS, pod(name, limits))
            uid = created["metadata"]["uid"]
            wait_for(functools.partial(seen, extender, uid), what=f"{name} seen")
            assert call.schedule(created, nodes) is not None, name
        for name in asks:
            item = wait_for(functools.partial(running, http, name), timeout=60, what=f"{name} running")
            assignment = Assignment.from_annotation(item["metadata"]["annotations"][P.annotations.assignment])
            assert assignment.node == item["spec"]["nodeName"]
            env = json.loads(item["metadata"]["annotations"][ENV_ANNOTATION])["main"]
            visible = env["NVIDIA_VISIBLE_DEVICES"].split(",")
            slots = assignment.containers["main"]
            if name.startswith("mig"):
                (slot,) = slots
                assert slot.mig_profile == "3g.40gb"
                assert visible[0].startswith("MIG-")
            else:
                assert visible == [s.uuid for s in slots]
                assert len(slots) == {"share": 1, "whole": 1, "multi": 2}[name.split("-")[0]]
            if name.startswith("share"):
                assert (slots[0].core_milli, slots[0].memory_mib) == (300, 20 * 1024)
    finally:
        call.close()
        for name in asks:
            http.delete(f"{PODS}/{name}", {"gracePeriodSeconds": 0})
        http.close()
