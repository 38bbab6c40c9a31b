"""End to end: Grafana dashboards on `runtimekit up` with share pods running and a real Prometheus
scraping the nodes' exporters. The kit's own (deploy/grafana/): every panel returns series, the node
variable lists the nodes, and the per-pod and per-container panels show each running GPU pod (one
GPU is given a critical XID so the health panels, which list what went wrong, have something to
show). The peers' dashboards users already run (tests/data/dashboards: NVIDIA's dcgm-exporter
dashboard, HAMi's) under the `nvidia` and `hami` presets, whose exporters write the peers' names:
every panel returns series but those reading what tests/exporter/test_peer_dashboards.py names as
not written."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.test_peer_dashboards import DASHBOARDS, NOT_WRITTEN
from fixtures.dashboards import DATA, metric_names
from fixtures.grafana import load, panel_queries, variables
from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.livedashboards import empty_panels, scraping
from fixtures.prometheus import PrometheusServer
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "lj-runtimekit-dashboard.json"
PODS = [ROOT / "examples" / "pods" / name for name in ("share.yaml", "whole-gpu.yaml", "multi-gpu.yaml")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    with runtimekit_up(["--nodes", "2", "--gpus-per-node", "4"], KitProtocol.default(), exporters=True) as up:
        for manifest in PODS:
            up.apply(manifest)
        yield up


@pytest.fixture(scope="module")
def prometheus(cluster: UpCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    with scraping(cluster, tmp_path_factory.mktemp("prometheus")) as server:
        yield server


def running(cluster: UpCluster) -> set[str] | None:
    items = cluster.json("get", "pods")["items"]
    names = {p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"}
    return names if len(names) == len(items) == len(PODS) else None


def test_every_panel_of_the_kits_dashboard_returns_series(cluster: UpCluster, prometheus: PrometheusServer) -> None:
    pods = wait_for(lambda: running(cluster), timeout=120, what="the example pods running")
    socket = cluster.record["nodes"][-1]["runtime_socket"]
    admin = [sys.executable, "-m", "runtimekit.cli.main", "runtime-admin", "--socket", socket]
    subprocess.run([*admin, "inject", "xid", "--gpu", "3", "--xid", "79"], check=True, capture_output=True)
    prometheus.wait("runtimekit_gpu_healthy == 0", bool)
    assert empty_panels(prometheus, DASHBOARD) == []
    for family in ("runtimekit_container_gpu_memory_used_bytes", "runtimekit_container_gpu_utilization_ratio"):
        used = prometheus.query(f"sum by (pod) ({family})")
        assert {r["metric"]["pod"] for r in used} == pods, family
    shown = prometheus.query(
        f'sum by (pod) (runtimekit_allocation_core_ratio{{node=~"{variables(load(DASHBOARD))["node"]}"}})'
    )
    assert {r["metric"]["pod"] for r in shown} == pods


def test_the_node_variable_lists_every_node(cluster: UpCluster, prometheus: PrometheusServer) -> None:
    (node,) = [v for v in load(DASHBOARD)["templating"]["list"] if v["name"] == "node"]
    family = node["query"].removeprefix("label_values(").split(",")[0]
    assert prometheus.label_values("node", family) == set(cluster.exporters)


PEER_PODS = {"nvidia": ROOT / "tests/e2e/peers/nvidia/gpu-pod.yaml", "hami": ROOT / "tests/e2e/peers/hami/sharing.yaml"}


@pytest.mark.parametrize("preset", sorted(PEER_PODS))
def test_the_peers_dashboards_return_series_under_their_preset(preset: str, tmp_path: Path) -> None:
    mode = {"nvidia": "dcgm", "hami": "hami"}[preset]
    (board,) = [DATA / name for name, m in DASHBOARDS.items() if m == mode]
    args = ["--protocol", preset, "--nodes", "2", "--gpus-per-node", "2", "--gpu-model", "A100-40GB"]
    with runtimekit_up(args, preset_protocol(preset), exporters=True) as up:
        up.apply(PEER_PODS[preset])
        wait_for(lambda: all_running(up), timeout=120, what=f"{PEER_PODS[preset].name} running")
        with scraping(up, tmp_path / "prometheus") as prometheus:
            empty = empty_panels(prometheus, board)
    expected = [q for q in panel_queries(board) if metric_names(q.query) & NOT_WRITTEN[mode]]
    assert empty == [f"{q.panel}: {q.query}" for q in expected]


def all_running(up: UpCluster) -> bool:
    items = up.json("get", "pods")["items"]
    return bool(items) and all(p["status"].get("phase") == "Running" for p in items)
