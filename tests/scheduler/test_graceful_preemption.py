"""Preemption and reclaim while victims terminate gracefully: an evicted pod keeps its node's room
until it is gone (deletionTimestamp set, still listed), and Volcano counts that room as the node's
future idle, so later sessions evict nothing more; the preemptor binds once the victim is gone."""

from __future__ import annotations

from typing import Any

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import LiveCache, live_cache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import TaskInfo
from scheduler.fake_api import P
from scheduler.volcano_cases import (
    RecordingApi,
    bound,
    build_node,
    build_pod,
    build_pod_group,
    build_priority_class,
    build_queue,
)

PREEMPT = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: proportion
"""
RECLAIM = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: proportion
"""


class GracefulApi(RecordingApi):
    """An API server whose evictions start a long grace period: the pod is marked deleting and stays
    until `gone` removes it."""

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evicted.append(f"{task.namespace}/{task.name}")
        obj = self.pods[f"{task.namespace}/{task.name}"]
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T00:01:00Z"
        assert self.cache is not None
        self.cache.on_pod("MODIFIED", obj)

    def gone(self, key: str) -> None:
        self.delete_pod(key)


def _start(conf: str, objects: dict[str, list[dict[str, Any]]]) -> tuple[GracefulApi, LiveCache, Framework]:
    api = GracefulApi()
    live = live_cache(P, P.scheduler_name, api, bind_workers=1, retry_seconds=0.0)
    api.attach(live.cache)
    for pc in objects.get("classes", []):
        live.cache.on_priority_class("ADDED", pc)
    for queue in objects.get("queues", []):
        live.cache.on_queue("ADDED", queue)
    for group in objects["groups"]:
        live.cache.on_podgroup("ADDED", group)
    for node in objects["nodes"]:
        api.add_node(node)
    for pod in objects["pods"]:
        api.add_pod(pod)
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext(protocol=P))
    live.include_running = framework.needs_running
    return api, live, framework


def _sessions(api: GracefulApi, live: LiveCache, framework: Framework, count: int) -> None:
    for _ in range(count):
        framework.run_once(live)
        assert live.binder.drain()


def _preempt_cluster() -> dict[str, list[dict[str, Any]]]:
    """Two nodes full of a low-priority job's pods (any may be evicted); a high-priority pod needing
    one victim's room."""
    return {
        "classes": [build_priority_class("high", 100000), build_priority_class("low", 10)],
        "queues": [build_queue("q1")],
        "nodes": [build_node("n1", "2", "2G"), build_node("n2", "2", "2G")],
        "groups": [
            build_pod_group("low", "c1", "q1", 1, priority_class="low"),
            build_pod_group("high", "c1", "q1", 1, priority_class="high"),
        ],
        "pods": [
            *(build_pod("c1", f"victim{i}", f"n{1 + i // 2}", "1", "1G", "low", created=i) for i in range(4)),
            build_pod("c1", "preemptor", "", "1", "1G", "high"),
        ],
    }


def test_a_terminating_victims_room_ends_preemption_and_the_preemptor_binds_when_it_is_gone() -> None:
    api, live, framework = _start(PREEMPT, _preempt_cluster())
    try:
        _sessions(api, live, framework, 5)
        assert len(api.evicted) == 1, api.evicted  # the victim is still terminating: no one else goes
        assert "c1/preemptor" not in bound(api)
        api.gone(api.evicted[0])
        _sessions(api, live, framework, 1)
        victim_node = f"n{1 + int(api.evicted[0][-1]) // 2}"
        assert bound(api) == {"c1/preemptor": victim_node}
        assert len(api.evicted) == 1
    finally:
        live.binder.close()


def test_a_pod_deleted_by_someone_else_is_room_too() -> None:
    """A pod being deleted by a user (not by this scheduler) is terminating room as well: no eviction."""
    cluster = _preempt_cluster()
    cluster["pods"][0]["metadata"]["deletionTimestamp"] = "2026-11-30T00:01:00Z"
    api, live, framework = _start(PREEMPT, cluster)
    try:
        _sessions(api, live, framework, 3)
        assert api.evicted == []
        api.gone("c1/victim0")
        _sessions(api, live, framework, 1)
        assert bound(api) == {"c1/preemptor": "n1"}
    finally:
        live.binder.close()


def test_reclaim_evicts_one_victim_while_it_terminates() -> None:
    """Queue q2 (idle, weight 1) reclaims from q1 (holding the whole cluster): one victim's room is
    enough, and while it terminates later sessions take no other."""
    cluster: dict[str, list[dict[str, Any]]] = {
        "queues": [build_queue("q1"), build_queue("q2")],
        "nodes": [build_node("n1", "4", "4G")],
        "groups": [build_pod_group("big", "c1", "q1", 1), build_pod_group("small", "c1", "q2", 1)],
        "pods": [
            *(build_pod("c1", f"victim{i}", "n1", "1", "1G", "big", created=i) for i in range(4)),
            build_pod("c1", "reclaimer", "", "1", "1G", "small"),
        ],
    }
    api, live, framework = _start(RECLAIM, cluster)
    try:
        _sessions(api, live, framework, 5)
        assert len(api.evicted) == 1, api.evicted
        api.gone(api.evicted[0])
        _sessions(api, live, framework, 1)
        assert bound(api) == {"c1/reclaimer": "n1"}
    finally:
        live.binder.close()
