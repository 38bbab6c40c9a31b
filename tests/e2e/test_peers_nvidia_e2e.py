"""End to end: the NVIDIA device plugin's pod manifests (peers/nvidia/: its README's GPU job, MIG slices by
the mixed strategy's names, one of them HAMi's mig_example.yaml) run unchanged on `runtimekit up
--protocol nvidia`, driven by the real kubectl; and a HAMi pod there is warned that the hami preset
reads its names. Nodes: two of two A100-40GBs, the first of each in static MIG mode (3g.20gb, 2g.10gb,
1g.5gb, 1g.5gb)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

NVIDIA = preset_protocol("nvidia")
DATA = Path(__file__).parent / "peers" / "nvidia"
HAMI = Path(__file__).parent / "peers" / "hami"


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    args = ["--protocol", "nvidia", "--nodes", "2", "--gpus-per-node", "2", "--gpu-model", "A100-40GB"]
    mig = ["--mig-mode", "0:static", "--mig-layout", "0:3g.20gb,2g.10gb,1g.5gb,1g.5gb"]
    with runtimekit_up([*args, *mig], NVIDIA) as up:
        yield up


def test_a_gpu_job_and_mig_slices_by_their_nvidia_names(cluster: UpCluster) -> None:
    cluster.apply(DATA / "gpu-pod.yaml")
    cluster.apply(DATA / "mig-pods.yaml")
    gpu_pod, mig_3g, mig_1g = cluster.running("gpu-pod", "mig-3g", "mig-1g")
    [whole] = cluster.shares(gpu_pod)["cuda-container"]
    assert whole["coreMilli"] == 1000
    assert cluster.visible(gpu_pod, "cuda-container") == [whole["uuid"]]
    for pod, profile in ((mig_3g, "3g.20gb"), (mig_1g, "1g.5gb")):
        [slot] = cluster.shares(pod)["main"]
        assert slot["migProfile"] == profile
        [device] = cluster.visible(pod, "main")
        assert device.startswith("MIG-")
    cluster.delete(DATA / "mig-pods.yaml")
    cluster.delete(DATA / "gpu-pod.yaml")


def test_more_whole_gpus_than_a_node_has_stay_pending(cluster: UpCluster) -> None:
    cluster.apply(DATA / "too-many.yaml")
    cluster.pending_because("too-many", "too few whole free GPUs")
    cluster.delete(DATA / "too-many.yaml")


def test_a_hami_pod_here_is_told_which_preset_reads_its_names(cluster: UpCluster) -> None:
    cluster.apply(HAMI / "scheduling-policy.yaml")  # nvidia.com/gpu: 1 and HAMi's policy annotations
    cluster.apply(HAMI / "default-use.yaml")  # nvidia.com/gpumem and nvidia.com/gpucores too

    def warned(name: str) -> list[str]:
        return cluster.events(name, "UnsupportedName")

    policy_pod = cluster.running("scheduling-policy")[0]  # its GPU is understood; the annotations have no effect
    assert json.loads(policy_pod["metadata"]["annotations"][NVIDIA.annotations.assignment])["policy"] == "packfrag"
    messages = sorted(warned("scheduling-policy"))
    assert [m.split(" is ")[0] for m in messages] == [
        "annotation hami.io/gpu-scheduler-policy",
        "annotation hami.io/node-scheduler-policy",
    ]
    assert all("not read by this cluster's protocol" in m and "the 'hami' preset" in m for m in messages)
    cluster.pending_because("default-use", "Insufficient nvidia.com/gpumem")
    names = sorted(m.split(" is ")[0] for m in warned("default-use"))
    assert names == ["resource nvidia.com/gpucores", "resource nvidia.com/gpumem"]
    cluster.delete(HAMI / "default-use.yaml")
    cluster.delete(HAMI / "scheduling-policy.yaml")
