"""End to end: HAMi's example manifests (peers/hami/, rewritten from Project-HAMi/HAMi examples/nvidia/
with their facts) run unchanged on `runtimekit up --protocol hami`, driven by the real kubectl. Each
pod runs on GPUs that give what it asked (HAMi's units: MiB, percent of each card's memory, percent of
its cores; its card types and UUIDs), as the assignment annotation, the container's
NVIDIA_VISIBLE_DEVICES and HAMi-core's memory limit show; or stays Pending for the reason HAMi gives
(a UUID no card has). Nodes: an A100-40GB node and an H200 node of four cards each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol.presets import preset_protocol
from runtimekit.scheduler.plugins.gpushare.fit import REASON_MEMORY

pytestmark = pytest.mark.e2e

HAMI = preset_protocol("hami")
DATA = Path(__file__).parent / "peers" / "hami"
MIB = {"A100-40GB": 40960, "H200": 143771}


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    args = ["--protocol", "hami", "--nodes", "2", "--gpus-per-node", "4", "--gpu-model", "A100-40GB,H200"]
    with runtimekit_up([*args, "--isolation", "hami-core"], HAMI) as up:
        yield up


@pytest.fixture
def manifests(cluster: UpCluster) -> Iterator[list[Path]]:
    """The manifests a test applies, deleted after it (so every test starts on empty cards)."""
    applied: list[Path] = []
    yield applied
    for path in reversed(applied):
        cluster.delete(path)


def apply(cluster: UpCluster, manifests: list[Path], name: str) -> None:
    path = DATA / name
    manifests.append(path)
    cluster.apply(path)


def memory_limits(cluster: UpCluster, pod: dict[str, object], container: str = "main") -> list[str]:
    env = cluster.env(pod, container)  # type: ignore[arg-type]
    return [v for k, v in sorted(env.items()) if k.startswith("CUDA_DEVICE_MEMORY_LIMIT_")]


def test_the_examples_units_reach_the_assignment_the_devices_and_the_memory_limit(
    cluster: UpCluster, manifests: list[Path]
) -> None:
    for name in ("default-use.yaml", "memory-fraction.yaml", "legacy-whole.yaml"):
        apply(cluster, manifests, name)
    default, fraction, legacy = cluster.running("default-use", "memory-fraction", "legacy-whole")
    models = cluster.node_models()

    [share] = cluster.shares(default)["main"]
    assert (share["coreMilli"], share["memoryMiB"]) == (300, 3000)  # 30 % of the cores, 3000 MiB
    assert cluster.visible(default, "main") == [share["uuid"]]
    assert memory_limits(cluster, default) == ["3000m"]
    notes, node = default["metadata"]["annotations"], default["spec"]["nodeName"]
    assert notes["hami.io/vgpu-devices-allocated"] == f"{share['uuid']},NVIDIA,3000,30:;"  # where HAMi's tools read
    assert notes["hami.io/vgpu-node"] == default["metadata"]["labels"]["hami.io/vgpu-node"] == node
    assert notes["hami.io/bind-phase"] == "success"  # its device plugin allocated it
    listed = cluster.pods(f"hami.io/vgpu-node={node}")  # as HAMi's vGPU monitor lists a node's pods
    assert "default-use" in [p["metadata"]["name"] for p in listed]
    assert {p["spec"]["nodeName"] for p in listed} == {node}

    shares = cluster.shares(fraction)["main"]
    half = MIB[models[fraction["spec"]["nodeName"]]] // 2  # 50 % of each card's own memory
    assert [(s["coreMilli"], s["memoryMiB"]) for s in shares] == [(300, half), (300, half)]
    assert sorted(cluster.visible(fraction, "main")) == sorted(s["uuid"] for s in shares)
    assert memory_limits(cluster, fraction) == [f"{half}m", f"{half}m"]

    whole = cluster.shares(legacy)["main"]
    total = MIB[models[legacy["spec"]["nodeName"]]]
    assert [(s["coreMilli"], s["memoryMiB"]) for s in whole] == [(1000, total), (1000, total)]
    assert len(set(cluster.visible(legacy, "main"))) == 2


def test_exclusive_cards_and_pods_that_never_share(cluster: UpCluster, manifests: list[Path]) -> None:
    apply(cluster, manifests, "exclusive.yaml")
    apply(cluster, manifests, "as-normal.yaml")
    exclusive, a, b = cluster.running("exclusive", "normal-a", "normal-b")
    taken = {s["uuid"] for s in cluster.shares(exclusive)["main"]}
    assert len(taken) == 2
    assert all(s["coreMilli"] == 1000 for s in cluster.shares(exclusive)["main"])
    [sa], [sb] = cluster.shares(a)["main"], cluster.shares(b)["main"]
    assert sa["uuid"] != sb["uuid"]
    assert not {sa["uuid"], sb["uuid"]} & taken


def test_two_sharing_pods_fit_what_they_asked(cluster: UpCluster, manifests: list[Path]) -> None:
    apply(cluster, manifests, "sharing.yaml")
    a, b = cluster.running("sharing-a", "sharing-b")
    models = cluster.node_models()
    for pod, (memory, cores) in ((a, (40, 600)), (b, (60, 400))):
        [share] = cluster.shares(pod)["main"]
        assert share["coreMilli"] == cores
        assert share["memoryMiB"] == MIB[models[pod["spec"]["nodeName"]]] * memory // 100


def test_card_types_to_use_and_to_avoid(cluster: UpCluster, manifests: list[Path]) -> None:
    for name in ("type-to-use.yaml", "type-not-use.yaml", "type-not-use-a100.yaml"):
        apply(cluster, manifests, name)
    to_use, not_use, not_a100 = cluster.running("type-to-use", "type-not-use", "type-not-use-a100")
    models = cluster.node_models()
    assert models[to_use["spec"]["nodeName"]] == "A100-40GB"  # "A100,V100": the A100 node, never the H200
    assert models[not_a100["spec"]["nodeName"]] == "H200"
    assert len(cluster.shares(not_use)["main"]) == 2  # neither a 1080 nor a 2080 here: any two cards
    node = to_use["spec"]["nodeName"]
    assert set(cluster.visible(to_use, "main")) <= set(cluster.node_uuids(node))


def test_uuids_to_use_and_to_avoid(cluster: UpCluster, manifests: list[Path], tmp_path: Path) -> None:
    apply(cluster, manifests, "uuid-to-use.yaml")
    apply(cluster, manifests, "uuid-not-use.yaml")
    cluster.pending_because("uuid-to-use", "no GPU with the UUIDs asked for (nvidia.com/use-gpuuuid")
    [not_use] = cluster.running("uuid-not-use")
    assert len(cluster.shares(not_use)["main"]) == 2
    # the same pod naming a card this cluster has: exactly that card
    h200 = next(n for n, m in cluster.node_models().items() if m == "H200")
    wanted = cluster.node_uuids(h200)[3]
    text = (DATA / "uuid-to-use.yaml").read_text().replace("name: uuid-to-use", "name: uuid-known")
    own = tmp_path / "uuid-known.yaml"
    own.write_text(text.replace("GPU-03f69c50-207a-2038-9b45-23cac89cb67d,", f"{wanted},"))
    manifests.append(own)
    cluster.apply(own)
    [known] = cluster.running("uuid-known")
    assert [s["uuid"] for s in cluster.shares(known)["main"]] == [wanted]
    assert cluster.visible(known, "main") == [wanted]


def test_scheduling_policies_scheduler_name_and_a_deployment(cluster: UpCluster, manifests: list[Path]) -> None:
    for name in ("scheduling-policy.yaml", "hami-scheduler.yaml", "deployment.yaml"):
        apply(cluster, manifests, name)
    policy, named = cluster.running("scheduling-policy", "hami-scheduler")
    assignment = policy["metadata"]["annotations"][HAMI.annotations.assignment]
    assert '"policy":"spread/binpack"' in assignment
    assert named["spec"]["schedulerName"] == "hami-scheduler"
    [share] = cluster.shares(named)["main"]
    assert share["memoryMiB"] == MIB[cluster.node_models()[named["spec"]["nodeName"]]] // 4
    [replica] = cluster.running_selected("app=vector-add", 1)
    assert replica["spec"]["schedulerName"] == "default-scheduler"
    assert [s["memoryMiB"] for s in cluster.shares(replica)["main"]] == [3000]


def test_an_annotation_no_preset_reads_is_warned_about_and_the_pod_still_gets_its_units(
    cluster: UpCluster, manifests: list[Path]
) -> None:
    apply(cluster, manifests, "dynamic-mig.yaml")
    [pod] = cluster.running("dynamic-mig")
    assert [s["memoryMiB"] for s in cluster.shares(pod)["main"]] == [8000, 8000]
    warned = cluster.events("dynamic-mig", "UnsupportedName")
    assert any("annotation nvidia.com/vgpu-mode" in m and "no protocol preset reads it" in m for m in warned), warned


def test_a_full_cluster_tells_a_pod_the_cards_reason(cluster: UpCluster, manifests: list[Path], tmp_path: Path) -> None:
    """Every card taken whole (exclusive.yaml's resources, four cards a pod): the cluster's one queue
    holds all it can deserve, yet a pod asking GPU memory and no CPU reads the card's reason, as HAMi
    gives it (CardInsufficientMemory), not that its queue is overused."""
    exclusive = (DATA / "exclusive.yaml").read_text().replace("nvidia.com/gpu: 2", "nvidia.com/gpu: 4")
    for name in ("full-a", "full-b"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(exclusive.replace("name: exclusive", f"name: {name}"))
        manifests.append(path)
        cluster.apply(path)
    cluster.running("full-a", "full-b")
    late = tmp_path / "late.yaml"
    late.write_text((DATA / "default-use.yaml").read_text().replace("name: default-use", "name: late", 1))
    manifests.append(late)
    cluster.apply(late)
    message = cluster.pending_because("late", REASON_MEMORY)  # HAMi's CardInsufficientMemory
    assert "overused" not in message, message
