"""Per-container usage end to end on the embedded cluster: share pods placed by the scheduler and
admitted by the simulated kubelet get per-container series from their node's exporter, driven by the
simulated usage model's pod annotations; the pod using more than its share is marked and gets one
GPUShareExceeded Event, however often Prometheus scrapes; a deleted pod's series go away."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cli.node_exporter import start_node_exporter
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.simusage import usage_annotations

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
CORE, MEMORY = usage_annotations(P.annotations.simulated_runtime)
GIB = 1 << 30


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=1, gpus_per_node=2, controller=False, exporter=start_node_exporter)
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


def pod(name: str, notes: dict[str, str]) -> dict[str, Any]:
    limits = {P.resources.core: "30", P.resources.memory: "10"}  # 30 % of a GPU, 10 GiB
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": notes},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
        },
    }


def series(url: str, name: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(httpx2.get(url).text):
        for sample in family.samples:
            if sample.name == name:
                out[sample.labels["pod"]] = sample.value
    return out


def test_share_pods_usage_over_share_event_and_deletion(cluster: EmbeddedCluster) -> None:
    http = cluster.http("usage-e2e")
    url = cluster.info()["nodes"][0]["exporter"]
    http.post(PODS, pod("small", {}))
    http.post(PODS, pod("greedy", {MEMORY: "20Gi", CORE: "50"}))
    used = "runtimekit_container_gpu_memory_used_bytes"
    wait_for(lambda: series(url, used) == {"small": 7 * GIB, "greedy": 20 * GIB}, what="both pods' usage series")
    assert series(url, "runtimekit_container_over_share") == {"small": 0.0, "greedy": 1.0}
    assert series(url, "runtimekit_container_gpu_utilization_ratio") == {"small": 0.18, "greedy": 0.5}

    def share_events() -> list[dict[str, Any]]:
        items = http.get("/api/v1/namespaces/default/events")["items"]
        return [e for e in items if e["reason"] == "GPUShareExceeded"]

    wait_for(share_events, what="the GPUShareExceeded Event")
    for _ in range(5):
        httpx2.get(url)
    events = share_events()
    assert [(e["involvedObject"]["name"], e["type"]) for e in events] == [("greedy", "Warning")]
    assert "GPU memory above the 10240 MiB granted" in events[0]["message"]
    http.delete(f"{PODS}/small")
    wait_for(lambda: set(series(url, used)) == {"greedy"}, what="the deleted pod's series to go")
