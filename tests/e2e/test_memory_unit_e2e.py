"""A cluster that mixes gpu-memory units, end to end on the embedded cluster: gpu-node-1's device plugin
uses the protocol's 1Gi, gpu-node-2's `--memory-unit 512Mi` (`runtimekit up --memory-unit
gpu-node-2=512Mi`). Each plugin advertises its node's memory in its unit and publishes the unit in the
node label; the scheduler counts a pod's `gpu-memory: N` in the unit of the node it checks, and
records MiB in the assignment; kubelet allocates N devices through that node's plugin and the runtime
grants the MiB. A request that only fits in the smaller unit lands on the 512Mi node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, gpu_model
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
RES = P.resources
PODS = "/api/v1/namespaces/default/pods"
H200_MIB = gpu_model("H200").memory_mib
UNITS = {"gpu-node-1": 1024, "gpu-node-2": 512}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=2, gpus_per_node=1, controller=False, memory_unit="gpu-node-2=512Mi")
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


@pytest.fixture
def http(cluster: EmbeddedCluster) -> Iterator[KubeHttp]:
    client = cluster.http("e2e")
    yield client
    client.close()


def pod(name: str, units: int, node: str | None = None) -> dict[str, Any]:
    limits = {RES.core: "10", RES.memory: str(units)}
    spec: dict[str, Any] = {
        "schedulerName": P.scheduler_name,
        "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_each_node_advertises_and_labels_its_own_unit(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    for name, unit in UNITS.items():
        node = http.get(f"/api/v1/nodes/{name}")
        assert node["metadata"]["labels"][P.labels.memory_unit] == ("1Gi" if unit == 1024 else "512Mi")
        assert node["status"]["allocatable"][RES.memory] == str(H200_MIB // unit)


def running(http: KubeHttp, name: str) -> dict[str, Any] | None:
    item = http.get(f"{PODS}/{name}")
    return item if (item.get("status") or {}).get("phase") == "Running" else None


@pytest.mark.parametrize(
    ("units", "node", "where"),
    [
        pytest.param(16, "gpu-node-1", "gpu-node-1", id="16-units-on-the-1Gi-node-are-16GiB"),
        pytest.param(16, "gpu-node-2", "gpu-node-2", id="16-units-on-the-512Mi-node-are-8GiB"),
        pytest.param(200, None, "gpu-node-2", id="200-units-fit-only-the-512Mi-node"),
    ],
)
def test_gpu_memory_counts_in_the_unit_of_the_node(
    cluster: EmbeddedCluster, http: KubeHttp, units: int, node: str | None, where: str
) -> None:
    name = f"mem-{units}-{where}"
    http.post(PODS, pod(name, units, node))
    try:
        item = wait_for(lambda: running(http, name), timeout=60, what=f"{name} running")
        assert item["spec"]["nodeName"] == where
        assignment = Assignment.from_annotation(item["metadata"]["annotations"][P.annotations.assignment])
        [share] = assignment.containers["main"]
        assert share.memory_mib == units * UNITS[where]
        [found] = [n for n in cluster.nodes if n.name == where]
        assert found.runtime_socket is not None
        with RuntimeClient(found.runtime_socket) as runtime:
            [allocation] = [a for a in runtime.list_allocations() if a.pod.name == name]
        assert [s.memory_mib for s in allocation.shares] == [units * UNITS[where]]
    finally:
        http.delete(f"{PODS}/{name}", {"gracePeriodSeconds": 0})
        wait_for(lambda: not http.list(PODS)[0], what="the pod gone")
