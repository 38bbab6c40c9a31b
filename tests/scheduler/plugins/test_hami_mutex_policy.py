"""HAMi's `mutex` GPU policy (`hami.io/gpu-scheduler-policy: mutex`, alone or in a chain): only GPUs that
hold no share are taken (HAMi's Fit skips a card whose `Used` is above 0); the order stays the other
entries' (or the default). The cases are HAMi's `TestFit_MutexPolicy` (pkg/device/nvidia/
device_test.go) and its `TestPolicyContains` chains (pkg/util/util_test.go), run through the cache."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.model import NodeInventory
from runtimekit.model.selector import selector_from_annotations
from runtimekit.protocol.presets import preset_protocol
from scheduler.fake_api import FakeApi, node_object, pod_object
from scheduler.plugins.test_gpushare_presets import make, placed, reasons, schedule

HAMI = preset_protocol("hami")
NODE = "node"
POLICY = "hami.io/gpu-scheduler-policy"
UUIDS = [str(g.uuid) for g in NodeInventory.simulated(NODE, "T4", 2, 16384).gpus]


def pod(name: str, policy: str | None, gpus: int = 1) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": "100", "nvidia.com/gpucores": "10"}
    annotations = {POLICY: policy} if policy is not None else {}
    return pod_object(name, limits, scheduler="hami-scheduler", annotations=annotations)


def one_gpu_used() -> tuple[FakeApi, Any, Any, str]:
    """A node of two cards, one holding a share (as HAMi's case: `used` and `idle`)."""
    api = FakeApi()
    api.add_node(node_object(NODE, 2, "T4"))
    live, framework = make(api)
    api.add_pod(pod("first", None))
    schedule(live, framework)
    _, [first] = placed(api, "first")
    return api, live, framework, str(first["uuid"])


@pytest.mark.parametrize("policy", ["mutex", "mutex,spread", "spread,numa,mutex", " binpack , mutex ", "mutex,binpack"])
def test_mutex_skips_the_used_card_and_takes_the_idle_one(policy: str) -> None:
    api, live, framework, used = one_gpu_used()
    api.add_pod(pod("p", policy))
    schedule(live, framework)
    node, [share] = placed(api, "p")
    assert node == NODE
    assert share["uuid"] == next(u for u in UUIDS if u != used)


def test_mutex_cannot_take_two_cards_when_one_is_idle() -> None:
    api, live, framework, _ = one_gpu_used()
    api.add_pod(pod("two", "mutex", gpus=2))
    schedule(live, framework)
    assert placed(api, "two") == ("", [])
    api.add_pod(pod("plain-two", None, gpus=2))  # without mutex both cards fit
    schedule(live, framework)
    assert len(placed(api, "plain-two")[1]) == 2


def test_every_card_in_use_keeps_a_mutex_pod_pending_saying_so() -> None:
    api, live, framework, used = one_gpu_used()
    idle = next(u for u in UUIDS if u != used)
    second = pod("second", None)
    second["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] = idle
    api.add_pod(second)
    schedule(live, framework)
    assert placed(api, "second")[1][0]["uuid"] == idle
    api.add_pod(pod("p", "mutex"))
    schedule(live, framework)
    assert placed(api, "p") == ("", [])
    assert any("GPUs in use: mutex (hami.io/gpu-scheduler-policy)" in m for m in reasons(api, "p"))


@pytest.mark.parametrize(
    ("policy", "mutex"),
    [("mutex", True), ("spread", False), ("", False), ("mutex,spread", True), ("spread,numa,mutex", True)],
)
def test_which_chains_name_mutex(policy: str, mutex: bool) -> None:
    selector = selector_from_annotations({POLICY: policy}, HAMI)
    assert (selector is not None and selector.unused_only) is mutex
