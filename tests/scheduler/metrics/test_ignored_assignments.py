"""`runtimekit_scheduler_unverified_assignments_total{reason}`: every reason written from the start,
each ignored assignment counted once per pod and annotation text."""

from __future__ import annotations

import copy

from prometheus_client import CollectorRegistry

from runtimekit.model import Assignment, GpuShare, NodeInventory, NodeName
from runtimekit.scheduler.cache.authority import REASONS
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.metrics.assignments import NAME, IgnoredAssignments
from runtimekit.scheduler.metrics.text import render
from scheduler.fake_api import FakeApi, P, node_object, pod_object


def scraped(registry: CollectorRegistry) -> dict[str, float]:
    out = {}
    for line in render(registry).decode().splitlines():
        if line.startswith(NAME + "{"):
            series, value = line.rsplit(" ", 1)
            out[series.removeprefix(NAME)] = float(value)
    return out


def test_each_reason_is_a_series_and_a_squatter_counts_once() -> None:
    api = FakeApi()
    api.add_node(node_object("n1", gpus=2))
    live = live_cache(P, P.scheduler_name, api)
    api.attach(live.cache)
    for node in api.nodes.values():
        live.cache.on_node("ADDED", node)
    registry = CollectorRegistry()
    registry.register(IgnoredAssignments(live.cache))
    assert scraped(registry) == {f'{{reason="{reason}"}}': 0.0 for reason in REASONS}
    inventory = NodeInventory.simulated("n1", "T4", 2, 16384)
    shares = tuple(GpuShare(g.uuid, g.index, 1000, 16384) for g in inventory.gpus)
    squatter = pod_object("squatter", {}, cpu="100m")
    squatter["spec"]["nodeName"] = "n1"
    squatter["metadata"]["annotations"][P.annotations.assignment] = Assignment(
        NodeName("n1"), {"main": shares}
    ).to_annotation()
    api.add_pod(squatter)
    for _ in range(3):
        live.cache.on_pod("MODIFIED", copy.deepcopy(squatter))
    assert scraped(registry)['{reason="requests"}'] == 1.0
    assert sum(scraped(registry).values()) == 1.0
    assert f"# TYPE {NAME} counter" in render(registry).decode()
