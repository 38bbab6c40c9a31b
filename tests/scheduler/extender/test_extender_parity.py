"""The extender places what the standalone scheduler places: the same seeded stream of share,
whole-GPU, multi-GPU and MIG pods, one at a time, through the standalone scheduler's live side (a
session of the allocate action, the binder) and through the extender's verbs as kube-scheduler calls
them (filter, prioritize, the top score, bind), on the same nodes with the same conf: every pod gets
the same node and the same GPUs, and the same pods fit nowhere."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from runtimekit.model import MigMode
from runtimekit.scheduler.cache.live import live_cache
from scheduler.extender.harness import Extender, extender_framework, gpu_node, kit_pod
from scheduler.fake_api import FakeApi, P

RES = P.resources


def nodes() -> list[dict[str, Any]]:
    out = [gpu_node(f"h{i}", gpus=8, model="H200") for i in range(5)]
    out += [gpu_node(f"a{i}", gpus=4, model="A100-80GB") for i in range(3)]
    out += [gpu_node(f"m{i}", gpus=2, model="A100-80GB", mig=MigMode.DYNAMIC) for i in range(2)]
    return out


def stream(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.55:
            limits: dict[str, Any] = {
                RES.core: rng.choice([10, 20, 25, 30, 50, 60, 75]),
                RES.memory: rng.choice([4, 8, 16]),
            }
        elif kind < 0.85:
            limits = {RES.gpu: rng.choice([1, 1, 1, 2, 4, 8])}
        else:
            limits = {f"{RES.mig_prefix}{rng.choice(['1g.10gb', '2g.20gb', '3g.40gb'])}": 1}
        pods.append(kit_pod(f"p{i:03d}", limits, cpu=str(rng.choice([1, 2, 4]))))
    return pods


def standalone(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Each pod's assignment (or "") as the standalone scheduler's live side makes it."""
    api = FakeApi()
    live = live_cache(P, P.scheduler_name, api, bind_workers=1)
    api.attach(live.cache)
    for node in nodes():
        api.add_node(node)
    framework = extender_framework()
    out: dict[str, str] = {}
    for pod in pods:
        api.add_pod(pod)
        framework.run_once(live)
        assert live.binder.drain()
        out[pod["metadata"]["name"]] = _assignment(api, pod)
    live.binder.close()
    return out


def through_the_extender(pods: list[dict[str, Any]]) -> dict[str, str]:
    ext = Extender(nodes())
    out: dict[str, str] = {}
    for pod in pods:
        ext.schedule(ext.add_pod(pod))
        out[pod["metadata"]["name"]] = _assignment(ext.api, pod)
    return out


def _assignment(api: FakeApi, pod: dict[str, Any]) -> str:
    stored = api.pods[f"default/{pod['metadata']['name']}"]
    return str(stored["metadata"]["annotations"].get(P.annotations.assignment, ""))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_extender_places_what_the_standalone_scheduler_places(seed: int) -> None:
    pods = stream(seed, 90)
    alone = standalone(copy.deepcopy(pods))
    extended = through_the_extender(copy.deepcopy(pods))
    placed = sum(1 for a in alone.values() if a)
    assert 30 < placed < len(pods)  # the cluster fills: some pods fit nowhere
    assert extended == alone
