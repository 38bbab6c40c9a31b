"""End to end: HAMi's device-plugin settings as protocol rules on `runtimekit up` under the `hami`
preset with `rules.memoryScaling: 2` and `rules.defaultMemory: 1000` (HAMi's `deviceMemoryScaling: 2`,
`defaultMemory: 1000`), on one A100-40GB card with HAMi-core isolation: the card offers twice its
memory, a share larger than the card runs with HAMi-core told to oversubscribe, a pod past the offered
memory stays Pending, and `nvidia.com/gpu: 1` alone is a share of the default memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from runtimekit.protocol.loader import parse_protocol_text
from runtimekit.protocol.presets import preset_text

pytestmark = pytest.mark.e2e

A100 = 40960
TEXT = (
    preset_text("hami")
    .replace("rules.memoryScaling: 1.0", "rules.memoryScaling: 2.0")
    .replace("rules.defaultMemory: 0", "rules.defaultMemory: 1000")
)
PROTOCOL = parse_protocol_text(TEXT)


def pod(name: str, limits: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  schedulerName: hami-scheduler
  containers:
  - name: main
    image: ubuntu:22.04
    command: ["bash", "-c", "sleep 86400"]
    resources:
      limits: {{{limits}}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    protocol = tmp_path_factory.mktemp("protocol") / "protocol.yaml"
    protocol.write_text(TEXT)
    args = ["--protocol", str(protocol), "--nodes", "1", "--gpus-per-node", "1", "--gpu-model", "A100-40GB"]
    with runtimekit_up([*args, "--isolation", "hami-core"], PROTOCOL) as up:
        yield up


def test_a_card_offers_scaled_memory_and_hami_core_is_told(cluster: UpCluster, tmp_path: Path) -> None:
    assert PROTOCOL.rules.memory_scaling == 2.0
    big = tmp_path / "big.yaml"
    big.write_text(pod("big", '"nvidia.com/gpu": 1, "nvidia.com/gpumem": 60000, "nvidia.com/gpucores": 30'))
    cluster.apply(big)
    [running] = cluster.running("big")
    [share] = cluster.shares(running)["main"]
    assert share["memoryMiB"] == 60000 > A100  # more than the card has
    env = cluster.env(running, "main")
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "60000m"
    assert env["CUDA_OVERSUBSCRIBE"] == "true"

    past = tmp_path / "past.yaml"
    past.write_text(pod("past", '"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30000'))  # 90000 > 2 x 40960
    cluster.apply(past)
    cluster.pending_because("past", "insufficient gpu-memory")

    bare = tmp_path / "bare.yaml"
    bare.write_text(pod("bare", '"nvidia.com/gpu": 1'))  # defaultMemory: a share, not the whole card
    cluster.apply(bare)
    [running] = cluster.running("bare")
    [share] = cluster.shares(running)["main"]
    assert (share["coreMilli"], share["memoryMiB"]) == (0, 1000)
    assert cluster.env(running, "main")["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1000m"
