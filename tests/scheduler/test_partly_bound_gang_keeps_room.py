"""A gang left partly bound keeps the room it needs when one of its members' bind fails: the member
backs off, but the gang stays in every session and goes first (the gang plugin's order), so no
competitor takes the GPU the failed bind gave back (live cache over a fake API server)."""

from __future__ import annotations

import threading
from typing import Any

from runtimekit.scheduler.binder import BindError
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.volcano_cases import build_pod_group

GROUP = "scheduling.k8s.io/group-name"


class FlakyApi(FakeApi):
    """The first bind of a gang member after `arm` fails, once the session that placed it is over
    (`go`), as a bind the API server refused or timed out under load."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.go = threading.Event()

    def bind(self, task: Any, node: str, annotations: Any, labels: Any = None) -> None:
        if task.name.startswith("train-"):
            with self.lock:
                fail, self.armed = self.armed, False
            if fail:
                assert self.go.wait(30)
                raise BindError("injected: the API server timed out")
        super().bind(task, node, annotations, labels)


def gpu_pod(name: str, group: str = "") -> dict[str, Any]:
    return pod_object(name, {P.resources.gpu: 1}, annotations={GROUP: group} if group else {})


def start(api: FakeApi, now: list[float]) -> tuple[LiveCache, Framework]:
    """A scheduler started on what the API server holds (a restart), on a clock the test moves."""
    live = live_cache(P, P.scheduler_name, api, clock=lambda: now[0], bind_workers=2, retry_seconds=30.0)
    api.attach(live.cache)
    live.cache.on_podgroup("ADDED", build_pod_group("train", "default", "default", 12, phase="Running"))
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    for pod in list(api.pods.values()):
        live.cache.on_pod("ADDED", pod)
    return live, Framework(load_conf(None), builtin_registry(), BuildContext(protocol=P))


def bound(api: FakeApi, prefix: str) -> int:
    return sum(
        1 for key, pod in api.pods.items() if key.startswith(f"default/{prefix}") and pod["spec"].get("nodeName")
    )


def test_a_partly_bound_gang_whose_member_bind_fails_still_completes_before_its_competitors() -> None:
    """16 GPUs; a gang of 12 left with 6 bound by a scheduler that stopped, 8 one-GPU competitors.
    The restarted scheduler places the gang's 6 and 4 competitors; one gang bind fails. Before,
    the failed member's back-off took the gang out of the next sessions, a competitor took the GPU
    it gave back, and the gang stayed at 11/12 (until partialHoldSeconds evicted it)."""
    api = FlakyApi()
    for name in ("n1", "n2"):
        api.add_node(node_object(name, gpus=8))
    now = [1000.0]
    for i in range(12):
        api.pods[f"default/train-{i}"] = gpu_pod(f"train-{i}", "train")
    first, framework = start(api, now)
    framework.run_once(first)
    assert first.binder.drain()
    first.binder.close()
    assert bound(api, "train-") == 12
    for i in range(6, 12):  # what a scheduler stopped half way through the gang's binds leaves
        api.pods[f"default/train-{i}"] = gpu_pod(f"train-{i}", "train")
    for i in range(8):
        api.pods[f"default/other-{i}"] = gpu_pod(f"other-{i}")
    second, framework = start(api, now)
    api.armed = True
    try:
        for _ in range(6):  # 3 s of sessions: past the failed bind's 1 s back-off
            framework.run_once(second)
            api.go.set()
            assert second.binder.drain()
            now[0] += 0.5
        assert (bound(api, "train-"), bound(api, "other-")) == (12, 4)
    finally:
        api.go.set()
        second.binder.close()
