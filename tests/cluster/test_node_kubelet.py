"""The simulated kubelet on a simulated node with the real node components: a runtime (simulated GPUs,
MPS isolation) and the device plugin, registered with the kubelet's device manager. Pods are bound
by hand with a signed assignment, as the scheduler would bind them (`fixtures.scheduling`); no
scheduler runs here."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from fixtures.scheduling import bind
from fixtures.waiting import wait_for
from runtimekit.api.kubelet import unix_target
from runtimekit.api.podresources.v1 import podresources_pb2 as pr
from runtimekit.api.podresources.v1 import podresources_pb2_grpc as pr_grpc
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.base.keyring import KeyRing
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, GpuShare, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol

P = KitProtocol.default()
RES = P.resources
NODE = "gpu-node-1"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=1, gpus_per_node=2, isolation="mps", scheduler=False, controller=False)
    with start_cluster(options, ready_timeout_s=60) as started:
        yield started


@pytest.fixture
def http(cluster: EmbeddedCluster) -> Iterator[KubeHttp]:
    client = cluster.http("test")
    yield client
    for pod in client.list(PODS)[0]:
        with contextlib.suppress(KubeError):
            client.delete(f"{PODS}/{pod['metadata']['name']}", {"gracePeriodSeconds": 0})
    wait_for(lambda: not client.list(PODS)[0], what="pods gone")
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as runtime:
        wait_for(lambda: not runtime.list_allocations(), what="runtime allocations released")
    client.close()


def gpu_pod(name: str, limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {"containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}]},
    }


def submit(
    cluster: EmbeddedCluster,
    http: KubeHttp,
    name: str,
    limits: dict[str, str],
    gpu: int | None = 0,
    annotations: dict[str, str] | None = None,
) -> None:
    """Create the pod; with a `gpu`, bind it as the scheduler would (half of that GPU), else give it
    `spec.nodeName` without an assignment."""
    pod = gpu_pod(name, limits, annotations)
    if gpu is None:
        pod["spec"]["nodeName"] = NODE
        http.post(PODS, pod)
        return
    share = GpuShare(simulated_uuid(NODE, gpu), gpu, 500, 20480)
    keys = KeyRing.from_folder(cluster.assignment_keys)
    bind(http.post, http.post(PODS, pod), NODE, Assignment(NodeName(NODE), {"main": (share,)}), keys)


def phase(http: KubeHttp, name: str, wanted: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pod = http.get(f"{PODS}/{name}")
        return pod if pod.get("status", {}).get("phase") == wanted else None

    return dict(wait_for(check, what=f"pod {name} {wanted}"))


SHARE = {RES.core: "50", RES.memory: "20"}


def test_the_node_registers_ready_with_its_gpu_resources(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    node = http.get(f"/api/v1/nodes/{NODE}")
    status = node["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    for key in ("capacity", "allocatable"):
        assert status[key][RES.gpu] == "2"
        assert status[key][RES.core] == "200"
        assert status[key][RES.memory] == "280"  # 2 x 140 GiB units of an H200
        assert {status[key]["cpu"], status[key]["memory"], status[key]["pods"]} == {"64", "512Gi", "110"}
    assert node["metadata"]["labels"][P.labels.gpu_model] == "H200"
    assert P.annotations.node_devices in node["metadata"]["annotations"]
    lease = http.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}")
    assert lease["spec"]["holderIdentity"] == NODE


def test_a_pod_is_admitted_through_the_device_plugin_and_the_runtime(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    submit(cluster, http, "trainer", SHARE, gpu=1)
    pod = phase(http, "trainer", "Running")
    env = json.loads(pod["metadata"]["annotations"][ENV_ANNOTATION])["main"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == simulated_uuid(NODE, 1)
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    statuses = pod["status"]["containerStatuses"]
    assert [(s["name"], s["ready"], "running" in s["state"]) for s in statuses] == [("main", True, True)]
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as runtime:
        assert [(a.pod.name, a.shares[0].uuid) for a in runtime.list_allocations()] == [
            ("trainer", simulated_uuid(NODE, 1))
        ]
    with grpc.insecure_channel(unix_target(str(cluster.socket_root / "n1" / "pod-resources.sock"))) as channel:
        listed = pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=5)
    devices = {
        d.resource_name: list(d.device_ids) for p in listed.pod_resources for c in p.containers for d in c.devices
    }
    assert len(devices[RES.core]) == 50
    assert {i.split("::")[0] for i in devices[RES.core]} == {simulated_uuid(NODE, 1)}


def test_a_failed_allocate_fails_the_pod_with_kubelets_message(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    submit(cluster, http, "stray", SHARE, gpu=None)  # no assignment: the plugin finds no pod to serve
    pod = phase(http, "stray", "Failed")
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    message = pod["status"]["message"]
    assert message.startswith("Pod was rejected: Allocate failed due to rpc error: code = FAILED_PRECONDITION desc = ")
    assert message.endswith(", which is unexpected")
    events = http.list("/api/v1/namespaces/default/events")[0]
    assert any(e["involvedObject"]["name"] == "stray" and e["reason"] == "UnexpectedAdmissionError" for e in events)


@pytest.mark.parametrize(
    ("limits", "reason", "detail"),
    [
        ({RES.gpu: "3"}, f"OutOf{RES.gpu}", f"{RES.gpu}, requested: 3, used: 0, capacity: 2"),
        ({"cpu": "65"}, "OutOfcpu", "cpu, requested: 65000, used: 0, capacity: 64000"),
    ],
    ids=["more-gpus-than-the-node", "more-cpu-than-the-node"],
)
def test_a_pod_that_does_not_fit_is_rejected_out_of_the_resource(
    cluster: EmbeddedCluster, http: KubeHttp, limits: dict[str, str], reason: str, detail: str
) -> None:
    submit(cluster, http, "big", limits, gpu=None)
    pod = phase(http, "big", "Failed")
    assert pod["status"]["reason"] == reason
    assert pod["status"]["message"] == f"Pod was rejected: Node didn't have enough resource: {detail}"


def test_an_extended_resource_no_plugin_advertises_is_let_through_as_kubelet_does(
    cluster: EmbeddedCluster, http: KubeHttp
) -> None:
    """kubelet's removeMissingExtendedResources: a scheduler extender's resource (HAMi's gpumem) is
    not the node's to count; only the resources it advertises are checked."""
    submit(cluster, http, "extender", {"example.com/fpga": "1"}, gpu=None)
    pod = phase(http, "extender", "Running")
    assert pod["spec"]["containers"][0]["resources"]["limits"]["example.com/fpga"] == "1"


def test_a_simulated_run_time_ends_in_success_and_frees_the_gpu(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    submit(cluster, http, "short", SHARE, annotations={P.annotations.simulated_runtime: "300ms"})
    pod = phase(http, "short", "Succeeded")
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as runtime:
        wait_for(lambda: not runtime.list_allocations(), what="the finished pod's allocation released")


def test_deletion_is_graceful_through_the_kubelet_and_releases_the_runtime(
    cluster: EmbeddedCluster, http: KubeHttp
) -> None:
    submit(cluster, http, "server", SHARE)
    phase(http, "server", "Running")
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    with RuntimeClient(node.runtime_socket) as runtime:
        assert len(runtime.list_allocations()) == 1
        marked = http.delete(f"{PODS}/server")  # default grace period: the kubelet finishes it
        assert marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
        wait_for(lambda: not http.list(PODS)[0], timeout=10, what="the pod deleted by its kubelet")
        wait_for(lambda: not runtime.list_allocations(), what="the runtime allocation released")
    assert not cluster.node(NODE).kubelet.running_pods()


def test_allocatable_follows_device_health(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    node = cluster.node(NODE)
    assert node.runtime_socket is not None

    def resources(key: str) -> tuple[str, str]:
        status = http.get(f"/api/v1/nodes/{NODE}")["status"][key]
        return status[RES.gpu], status[RES.core]

    with RuntimeClient(node.runtime_socket) as runtime:
        runtime.set_device_health(simulated_uuid(NODE, 1), False, "test: XID 79")
        try:
            wait_for(lambda: resources("allocatable") == ("1", "100"), what="allocatable without the sick GPU")
            assert resources("capacity") == ("2", "200")
        finally:
            runtime.set_device_health(simulated_uuid(NODE, 1), True, "test: recovered")
        wait_for(lambda: resources("allocatable") == ("2", "200"), what="allocatable with the GPU back")


def test_a_pods_status_reports_the_health_of_the_devices_it_holds(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    """kubelet's allocatedResourcesStatus (KEP-4680, beta in 1.36): per container and resource, every
    device ID the pod holds with its health, written again when the device plugin reports a change."""
    submit(cluster, http, "watched", SHARE, gpu=1)
    phase(http, "watched", "Running")
    node = cluster.node(NODE)
    assert node.runtime_socket is not None
    sick = simulated_uuid(NODE, 1)

    def reported() -> dict[str, set[tuple[str, str]]]:
        [status] = http.get(f"{PODS}/watched")["status"]["containerStatuses"]
        return {
            r["name"]: {(h["resourceID"].split("::")[0], h["health"]) for h in r["resources"]}
            for r in status.get("allocatedResourcesStatus") or []
        }

    wait_for(lambda: reported() == {RES.core: {(sick, "Healthy")}, RES.memory: {(sick, "Healthy")}}, what="healthy")
    [status] = http.get(f"{PODS}/watched")["status"]["containerStatuses"]
    assert [len(r["resources"]) for r in status["allocatedResourcesStatus"]] == [50, 20]  # one entry per device ID
    with RuntimeClient(node.runtime_socket) as runtime:
        runtime.set_device_health(sick, False, "test: XID 79")
        try:
            wait_for(
                lambda: reported() == {RES.core: {(sick, "Unhealthy")}, RES.memory: {(sick, "Unhealthy")}},
                what="the pod's devices reported unhealthy",
            )
            assert phase(http, "watched", "Running")  # the pod keeps running, as with kubelet
        finally:
            runtime.set_device_health(sick, True, "test: recovered")
    wait_for(lambda: reported() == {RES.core: {(sick, "Healthy")}, RES.memory: {(sick, "Healthy")}}, what="recovered")
