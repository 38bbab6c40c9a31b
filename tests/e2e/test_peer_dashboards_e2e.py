"""End to end: on the embedded cluster under the `nvidia` and `hami` presets, with share pods running,
each node's exporter serves every metric the peers' Grafana dashboards (tests/data/dashboards) read,
but the ones tests/exporter/test_peer_dashboards.py names as not written — with no flag: the preset
turns the peer's names on. (obs35c's live Prometheus harness runs the same queries for series.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.test_peer_dashboards import DASHBOARDS, NOT_WRITTEN
from fixtures.dashboards import DATA, metric_names, queries
from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.cli.node_exporter import start_node_exporter
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

PODS = "/api/v1/namespaces/default/pods"
BOARD = {mode: name for name, mode in DASHBOARDS.items()}


def pod(name: str, preset: str) -> dict[str, Any]:
    protocol = preset_protocol(preset)
    limits = {protocol.resources.gpu: "1"}
    if preset == "hami":
        limits |= {"nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}  # HAMi's units: MiB, percent
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": protocol.scheduler_name,
            "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
        },
    }


@pytest.fixture(params=["nvidia", "hami"])
def cluster(request: pytest.FixtureRequest) -> Iterator[tuple[str, EmbeddedCluster]]:
    options = ClusterOptions(
        nodes=1, gpus_per_node=2, controller=False, protocol_path=request.param, exporter=start_node_exporter
    )
    with start_cluster(options, ready_timeout_s=90) as started:
        yield request.param, started


def test_a_presets_exporter_serves_what_its_peers_dashboard_reads(cluster: tuple[str, EmbeddedCluster]) -> None:
    preset, started = cluster
    mode = {"nvidia": "dcgm", "hami": "hami"}[preset]
    http = started.http("dashboards-e2e")
    names = ["one", "two"] if preset == "hami" else ["one"]
    for name in names:
        http.post(PODS, pod(name, preset))
    url = started.info()["nodes"][0]["exporter"]

    def served() -> set[str] | None:
        families = list(text_string_to_metric_families(httpx2.get(url, timeout=10).text))
        pods = {s.labels.get("pod") for f in families for s in f.samples if f.name.startswith("runtimekit_container")}
        return {f.name for f in families} if set(names) <= pods else None

    written = wait_for(served, timeout=60, what="the pods' containers in the exporter's usage series")
    read = set().union(*(metric_names(q.promql) for q in queries(DATA / BOARD[mode])))
    assert read - written == NOT_WRITTEN[mode]
    http.close()
