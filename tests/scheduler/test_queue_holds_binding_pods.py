"""A queue holds the pods the scheduler is binding, as Volcano's proportion and capacity count a
job's Binding tasks in their queue's allocated: a session that runs while binds are in flight must
not let a capped queue past its capability (live cache over a fake API server whose binds wait)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf, parse_conf
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.volcano_cases import build_queue

CORE, QUEUE = P.resources.core, "scheduling.volcano.sh/queue-name"
CAPACITY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: gpushare
"""


class HeldApi(FakeApi):
    """Binds wait until `release` is set, as binds in flight across sessions do on a busy API server."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def bind(self, task: Any, node: str, annotations: Any, labels: Any = None) -> None:
        assert self.release.wait(30)
        super().bind(task, node, annotations, labels)


def whole_gpu(name: str, queue: str) -> dict[str, Any]:
    return pod_object(name, {CORE: 100}, annotations={QUEUE: queue})


@pytest.mark.parametrize("conf", [None, CAPACITY], ids=["proportion", "capacity"])
def test_a_capped_queue_counts_its_binding_pods_and_leaves_the_other_queue_its_room(conf: str | None) -> None:
    """Two queues capped at one GPU each on a node of two: q1's second pod, created while its first
    is still binding, waits, and q2's pod gets the other GPU (before, the second session saw q1
    empty, bound both of q1's pods, and q2's pod found no GPU left)."""
    api = HeldApi()
    api.add_node(node_object("n1", gpus=2))
    live = live_cache(P, P.scheduler_name, api, bind_workers=2, retry_seconds=0.0)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    for name in ("q1", "q2"):
        spec = {"cpu": "8", CORE: "100"}
        live.cache.on_queue("ADDED", build_queue(name, capability=spec, deserved=spec if conf else None))
    framework = Framework(parse_conf(conf) if conf else load_conf(None), builtin_registry(), BuildContext(protocol=P))
    try:
        api.add_pod(whole_gpu("a", "q1"))
        framework.run_once(live)  # a is placed; its bind waits
        api.add_pod(whole_gpu("b", "q1"))
        framework.run_once(live)
        api.add_pod(whole_gpu("c", "q2"))
        framework.run_once(live)
        api.release.set()
        assert live.binder.drain()
        bound = {key: pod["spec"].get("nodeName") for key, pod in api.pods.items() if pod["spec"].get("nodeName")}
        assert sorted(bound) == ["default/a", "default/c"]
    finally:
        api.release.set()
        live.binder.close()
