"""End to end on the embedded cluster: the live scheduler places share, whole-GPU and multi-GPU pods on
simulated nodes; the simulated kubelets admit them through the device plugins and runtimes; every
pod runs on the GPUs its assignment names, and no GPU is ever booked beyond its compute or memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cluster.kubelet.kubelet import ENV_ANNOTATION
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, gpu_model
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
RES = P.resources
PODS = "/api/v1/namespaces/default/pods"
GPUS = 4
H200_MIB = gpu_model("H200").memory_mib


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with start_cluster(ClusterOptions(nodes=2, gpus_per_node=GPUS, controller=False), ready_timeout_s=90) as started:
        yield started


@pytest.fixture
def http(cluster: EmbeddedCluster) -> Iterator[KubeHttp]:
    client = cluster.http("e2e")
    yield client
    for pod in client.list(PODS)[0]:
        client.delete(f"{PODS}/{pod['metadata']['name']}", {"gracePeriodSeconds": 0})
    wait_for(lambda: not client.list(PODS)[0], what="pods gone")
    for node in cluster.nodes:
        assert node.runtime_socket is not None
        with RuntimeClient(node.runtime_socket) as runtime:
            wait_for(lambda r=runtime: not r.list_allocations(), what=f"{node.name} released")  # type: ignore[misc]
    client.close()


def pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
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


def settled(http: KubeHttp, count: int) -> list[dict[str, Any]] | None:
    """All `count` pods Running, or Pending with PodScheduled=False; None until then."""
    pods = http.list(PODS)[0]
    if len(pods) != count:
        return None
    for item in pods:
        status = item.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        unschedulable = conditions.get("PodScheduled", {}).get("status") == "False"
        if status.get("phase") != "Running" and not (status.get("phase") == "Pending" and unschedulable):
            return None
    return pods


def check_placements(cluster: EmbeddedCluster, pods: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Every running pod runs where and on what its assignment says; returns (milli, MiB) booked per GPU."""
    booked: dict[str, tuple[int, int]] = {}
    expected: dict[str, set[tuple[str, str]]] = {n.name: set() for n in cluster.nodes}
    for item in pods:
        if item["status"].get("phase") != "Running":
            continue
        meta = item["metadata"]
        assignment = Assignment.from_annotation(meta["annotations"][P.annotations.assignment])
        assert assignment.node == item["spec"]["nodeName"]
        uuids = [s.uuid for s in assignment.containers["main"]]
        env = json.loads(meta["annotations"][ENV_ANNOTATION])["main"]
        assert env["NVIDIA_VISIBLE_DEVICES"].split(",") == uuids
        for share in assignment.shares():
            core, mem = booked.get(share.uuid, (0, 0))
            booked[share.uuid] = (core + share.core_milli, mem + share.memory_mib)
            expected[assignment.node].add((meta["name"], share.uuid))
    for node in cluster.nodes:
        assert node.runtime_socket is not None
        with RuntimeClient(node.runtime_socket) as runtime:
            held = {(a.pod.name, s.uuid) for a in runtime.list_allocations() for s in a.shares}
        assert held == expected[node.name]
    for uuid, (core, mem) in booked.items():
        assert core <= 1000, f"GPU {uuid} booked {core} milli"
        assert mem <= H200_MIB, f"GPU {uuid} booked {mem} MiB"
    return booked


def test_share_whole_and_multi_gpu_pods_run_where_they_are_assigned(cluster: EmbeddedCluster, http: KubeHttp) -> None:
    http.post(PODS, pod("share", {RES.core: "30", RES.memory: "20"}))
    http.post(PODS, pod("whole", {RES.gpu: "1"}))
    http.post(PODS, pod("multi", {RES.gpu: "2"}))
    pods = wait_for(lambda: settled(http, 3), what="three pods settled")
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == dict.fromkeys(
        ("share", "whole", "multi"), "Running"
    )
    booked = check_placements(cluster, pods)
    by_name = {
        p["metadata"]["name"]: Assignment.from_annotation(p["metadata"]["annotations"][P.annotations.assignment])
        for p in pods
    }
    [share] = by_name["share"].containers["main"]
    assert (share.core_milli, share.memory_mib) == (300, 20 * 1024)
    whole = list(by_name["whole"].containers["main"])
    multi = list(by_name["multi"].containers["main"])
    assert len(whole) == 1
    assert len({s.uuid for s in multi}) == 2
    for exclusive in (*whole, *multi):
        assert booked[exclusive.uuid] == (1000, H200_MIB)


def test_a_flood_of_pods_never_overbooks_a_gpu_and_waiting_pods_run_when_room_appears(
    cluster: EmbeddedCluster, http: KubeHttp
) -> None:
    names = []
    for i in range(12):
        names.append(f"share-{i}")
        # Sizes differ so that the device plugin can tell the pods apart: kubelet's Allocate names no
        # pod, and two waiting pods of one size on a node may swap assignments (docs/architecture.md).
        http.post(PODS, pod(names[-1], {RES.core: str(45 - i), RES.memory: str(60 - i)}))
    for i in range(4):
        names.append(f"whole-{i}")
        http.post(PODS, pod(names[-1], {RES.gpu: "1"}))
    http.post(PODS, pod("too-big", {RES.gpu: str(GPUS + 1)}))
    pods = wait_for(lambda: settled(http, len(names) + 1), timeout=60, what="the flood settled")
    assert not [p for p in pods if p["status"].get("phase") == "Failed"], "a kubelet refused a scheduled pod"
    check_placements(cluster, pods)
    waiting = sorted(p["metadata"]["name"] for p in pods if p["status"]["phase"] == "Pending")
    assert "too-big" in waiting
    big = next(p for p in pods if p["metadata"]["name"] == "too-big")
    condition = next(c for c in big["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["reason"] == "Unschedulable"
    fitting = [n for n in waiting if n != "too-big"]
    assert fitting, "16 pods asking for 8.74 GPUs' compute should not all fit on 8 GPUs"
    for item in pods:
        if item["status"]["phase"] == "Running" and item["metadata"]["name"].startswith("share"):
            http.delete(f"{PODS}/{item['metadata']['name']}", {"gracePeriodSeconds": 0})
    wait_for(
        lambda: all(http.get(f"{PODS}/{n}")["status"].get("phase") == "Running" for n in fitting),
        timeout=60,
        what="every waiting pod scheduled into the freed room (all of them fit once the shares are gone)",
    )

    def consistent() -> bool:  # the other node's kubelet may still be stopping a deleted pod
        try:
            check_placements(cluster, http.list(PODS)[0])
        except AssertionError:
            return False
        return True

    wait_for(consistent, what="runtimes holding exactly the running pods' assignments")
    check_placements(cluster, http.list(PODS)[0])
