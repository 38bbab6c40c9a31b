"""The health path end to end on the embedded cluster: an XID injected into a simulated GPU is seen
by the node's exporter, which marks the GPU unhealthy in the runtime; the device plugin reports its
devices Unhealthy and republishes the node's inventory; the scheduler stops placing on it; and the
GPU comes back once the exporter's recovery time has passed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx2
import pytest

from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cli.node_exporter import start_node_exporter
from runtimekit.exporter.config import ExporterConfig, HealthConfig
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    config = ExporterConfig(health=HealthConfig(interval_seconds=0.2, recovery_seconds=4.0))
    options = ClusterOptions(
        nodes=1, gpus_per_node=2, controller=False, exporter=partial(start_node_exporter, config=config)
    )
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {P.resources.gpu: "1"}}}],
        },
    }


def test_an_xid_takes_a_gpu_out_of_scheduling_until_it_recovers(cluster: EmbeddedCluster) -> None:
    http = cluster.http("health-e2e")
    node = cluster.nodes[0]
    assert node.runtime_socket is not None
    assert cluster.info()["nodes"][0]["exporter"].startswith("http://127.0.0.1:")

    def inventory() -> NodeInventory:
        annotations = http.get(f"/api/v1/nodes/{node.name}")["metadata"]["annotations"]
        return NodeInventory.from_annotation(node.name, annotations[P.annotations.node_devices])

    with RuntimeClient(node.runtime_socket) as runtime:
        runtime.inject_fault(pb.FAULT_KIND_XID, 0, xid=79)
    wait_for(lambda: not inventory().gpus[0].healthy, what="GPU 0 unhealthy in the node annotation")
    metrics = httpx2.get(cluster.info()["nodes"][0]["exporter"]).text
    assert 'runtimekit_gpu_healthy{gpu="0"' in metrics
    assert "XID 79" in metrics
    wait_for(
        lambda: http.get(f"/api/v1/nodes/{node.name}")["status"]["allocatable"][P.resources.gpu] == "1",
        what="kubelet's allocatable to drop the unhealthy GPU",
    )
    http.post(PODS, pod("first"))
    http.post(PODS, pod("second"))
    first = wait_for(
        lambda: http.get(f"{PODS}/first")["spec"].get("nodeName") and http.get(f"{PODS}/first"), what="first placed"
    )
    assignment = json.loads(first["metadata"]["annotations"][P.annotations.assignment])
    assert assignment["containers"]["main"][0]["index"] == 1  # not the unhealthy GPU
    wait_for(
        lambda: any(
            e["reason"] == "FailedScheduling"
            for e in http.get("/api/v1/namespaces/default/events", {"fieldSelector": "involvedObject.name=second"})[
                "items"
            ]
        ),
        what="second unschedulable",
    )
    # the exporter clears its mark after recovery_seconds: GPU 0 returns and the waiting pod lands on it
    wait_for(lambda: inventory().gpus[0].healthy, what="GPU 0 healthy again")
    second = wait_for(
        lambda: http.get(f"{PODS}/second")["spec"].get("nodeName") and http.get(f"{PODS}/second"), what="second placed"
    )
    assert (
        json.loads(second["metadata"]["annotations"][P.annotations.assignment])["containers"]["main"][0]["index"] == 0
    )
    http.close()
