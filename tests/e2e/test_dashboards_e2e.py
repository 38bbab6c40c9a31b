"""End to end: the kit's Grafana dashboard (deploy/grafana/) on `runtimekit up` with share pods
running and a real Prometheus scraping the nodes' exporters: every panel returns series, the node
variable lists the nodes, and the per-pod panels show each running GPU pod. One GPU is given a
critical XID so the health panels (which list what went wrong) have something to show."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.livedashboards import empty_panels, scraping
from fixtures.grafana import load, variables
from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.prometheus import PrometheusServer
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol

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
    shown = prometheus.query(
        f'sum by (pod) (runtimekit_allocation_core_ratio{{node=~"{variables(load(DASHBOARD))["node"]}"}})'
    )
    assert {r["metric"]["pod"] for r in shown} == pods


def test_the_node_variable_lists_every_node(cluster: UpCluster, prometheus: PrometheusServer) -> None:
    (node,) = [v for v in load(DASHBOARD)["templating"]["list"] if v["name"] == "node"]
    family = node["query"].removeprefix("label_values(").split(",")[0]
    assert prometheus.label_values("node", family) == set(cluster.exporters)
