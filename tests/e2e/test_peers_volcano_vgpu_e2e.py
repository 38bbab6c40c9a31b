"""End to end: Volcano vGPU's example manifests (peers/volcano-vgpu/, from Project-HAMi/volcano-vgpu-device-
plugin examples/ and volcano-sh/volcano docs/user-guide/how_to_use_volcano_vgpu.md and
how_to_use_gpu_sharing.md, with their facts) run unchanged on `runtimekit up --protocol volcano-vgpu`,
driven by the real kubectl: pods name the scheduler `volcano`, ask `volcano.sh/vgpu-number`,
`vgpu-memory` (MiB) and `vgpu-cores`; the UUID annotations are Volcano's (the denylist wins). Nodes: an
A100-80GB node and an H200 node of two cards each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

VOLCANO = preset_protocol("volcano-vgpu")
DATA = Path(__file__).parent / "peers" / "volcano-vgpu"


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    args = ["--protocol", "volcano-vgpu", "--nodes", "2", "--gpus-per-node", "2", "--gpu-model", "A100-80GB,H200"]
    with runtimekit_up(args, VOLCANO) as up:
        yield up


def test_the_vgpu_examples_get_their_mib_and_cores(cluster: UpCluster) -> None:
    for name in ("case01.yaml", "case02.yaml", "case03.yaml", "hami-core.yaml"):
        cluster.apply(DATA / name)
    case01, case02, case03, hami_core = cluster.running("case01", "case02", "case03", "hami-core")
    assert [s["memoryMiB"] for s in cluster.shares(case01)["main"]] == [1024]
    assert [s["memoryMiB"] for s in cluster.shares(case02)["main"]] == [10240]
    shares = cluster.shares(case03)
    assert sorted(shares) == ["first", "second"]  # the container without a request gets no GPU
    assert [s["memoryMiB"] for s in shares["first"]] == [2000, 2000]
    assert [s["memoryMiB"] for s in shares["second"]] == [3000, 3000]
    for container in ("first", "second"):
        assert len({s["uuid"] for s in shares[container]}) == 2  # two vGPUs: two distinct cards
        assert sorted(cluster.visible(case03, container)) == sorted(s["uuid"] for s in shares[container])
    [share] = cluster.shares(hami_core)["cuda-container"]
    assert (share["coreMilli"], share["memoryMiB"]) == (500, 3000)
    for name in ("case01.yaml", "case02.yaml", "case03.yaml", "hami-core.yaml"):
        cluster.delete(DATA / name)


def test_a_deployment_of_ten_vgpus_of_16_gib(cluster: UpCluster) -> None:
    cluster.apply(DATA / "deployment.yaml")
    pods = cluster.running_selected("app=resnet101-server", 10)
    per_card: dict[str, int] = {}
    for pod in pods:
        [share] = cluster.shares(pod)["resnet101-container"]
        assert share["memoryMiB"] == 16384
        per_card[share["uuid"]] = per_card.get(share["uuid"], 0) + share["memoryMiB"]
    models = cluster.node_models()
    sizes = {u: {"A100-80GB": 81920, "H200": 143771}[models[n]] for n in models for u in cluster.node_uuids(n)}
    assert all(used <= sizes[uuid] for uuid, used in per_card.items())
    cluster.delete(DATA / "deployment.yaml")


def test_the_denylist_wins_over_the_allowlist(cluster: UpCluster) -> None:
    cluster.apply(DATA / "uuid-not-use.yaml")
    cluster.pending_because("uuid-both", "no GPU with the UUIDs asked for (volcano.sh/vgpu-use-gpuuuid")
    cluster.delete(DATA / "uuid-not-use.yaml")


def test_volcanos_older_gpu_memory_alone_is_refused_saying_what_to_add(cluster: UpCluster) -> None:
    """The device plugin does not register MiB memory devices (143771 a card), so kubelet would never
    call Allocate for this pod: it stays Pending saying so, rather than running without its GPU."""
    cluster.apply(DATA / "gpu-share.yaml")
    cluster.pending_because("gpu-share", "ask for volcano.sh/vgpu-number: 1 as well")
    cluster.delete(DATA / "gpu-share.yaml")
