"""End to end: Aliyun gpushare's samples and user-guide StatefulSet (peers/gpushare/, from
AliyunContainerService/gpushare-scheduler-extender samples/ and docs/userguide.md with their facts) run
unchanged on `runtimekit up --protocol gpushare`, driven by the real kubectl. `aliyun.com/gpu-mem`
counts GiB of one card; nodes advertise `aliyun.com/gpu-count` cards and `aliyun.com/gpu-mem` GiB, as
Aliyun's device plugin does. Nodes: two of two T4s (15 GiB, the guide's cards)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

GPUSHARE = preset_protocol("gpushare")
DATA = Path(__file__).parent / "peers" / "gpushare"


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    args = ["--protocol", "gpushare", "--nodes", "2", "--gpus-per-node", "2", "--gpu-model", "T4"]
    with runtimekit_up(args, GPUSHARE) as up:
        yield up


def test_nodes_advertise_cards_and_gib_as_aliyuns_device_plugin_does(cluster: UpCluster) -> None:
    for node in cluster.json("get", "nodes")["items"]:
        allocatable = node["status"]["allocatable"]
        assert allocatable["aliyun.com/gpu-count"] == "2"
        assert allocatable["aliyun.com/gpu-mem"] == "30"  # 2 x 15 GiB


def test_the_samples_run_on_one_card_each_with_their_gib(cluster: UpCluster) -> None:
    cluster.apply(DATA / "binpack.yaml")
    pods = [cluster.running_selected(f"app=binpack-{i}", 1)[0] for i in (1, 2, 3)]
    for pod in pods:
        [container] = pod["spec"]["containers"]
        [share] = cluster.shares(pod)[container["name"]]
        assert share["memoryMiB"] == 2 * 1024
        assert share["coreMilli"] == 0  # memory only: gpushare assumes no compute share
        assert cluster.visible(pod, container["name"]) == [share["uuid"]]
    cluster.delete(DATA / "binpack.yaml")


def test_a_request_larger_than_any_card_stays_pending(cluster: UpCluster) -> None:
    cluster.apply(DATA / "too-big.yaml")
    name = cluster.json("get", "pods", "-l", "app=binpack-4")["items"][0]["metadata"]["name"]
    message = cluster.pending_because(name, "gpu-memory request larger than the GPU")
    assert message.startswith("0/2 nodes are available")
    cluster.delete(DATA / "too-big.yaml")


def test_the_user_guides_statefulset_takes_a_third_of_a_card_per_pod(cluster: UpCluster) -> None:
    cluster.apply(DATA / "statefulset.yaml")
    pods = cluster.running_selected("app=binpack-ss", 3)
    assert sorted(p["metadata"]["name"] for p in pods) == ["binpack-ss-0", "binpack-ss-1", "binpack-ss-2"]
    for pod in pods:
        [share] = cluster.shares(pod)["binpack-ss"]
        assert share["memoryMiB"] == 3 * 1024
    cluster.delete(DATA / "statefulset.yaml")
