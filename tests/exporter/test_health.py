"""Health detection: the decision table, and the whole path with a real runtime and Prometheus."""

from __future__ import annotations

import json
import re
import time

import pytest

from exporter.conftest import ROOT, Exporter, Node, Prometheus
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.exporter.config import HealthConfig
from runtimekit.exporter.health import HealthState, evaluate
from runtimekit.exporter.sample import GpuReading, Sample, Xid

CONFIG = HealthConfig(temperature_celsius=90, temperature_hysteresis_celsius=5, recovery_seconds=60)


def gpu(uuid: str = "GPU-1", xids: tuple[Xid, ...] = (), ecc: int = 0, temp: float | None = 50.0) -> GpuReading:
    return GpuReading(0, uuid, "H200", 0.5, 0.1, 1.0, 2.0, temp, 100.0, 700.0, 0, ecc, len(xids), xids, True, "", "off")


def step(state: HealthState, now: float, **kwargs: object) -> list[tuple[bool, str]]:
    actions = evaluate(state, Sample("n", (gpu(**kwargs),)), CONFIG, now)  # type: ignore[arg-type]
    return [(a.healthy, a.reason) for a in actions]


def test_critical_xids_mark_and_recover_application_xids_do_not() -> None:
    state = HealthState()
    assert step(state, 0, xids=(Xid(13, 1000), Xid(43, 1001))) == []
    assert step(state, 1, xids=(Xid(13, 1000), Xid(43, 1001), Xid(79, 2000))) == [(False, "critical XID 79")]
    assert step(state, 30, xids=(Xid(79, 2000),)) == []  # the same event again: no news
    assert step(state, 59, xids=(Xid(79, 2000), Xid(48, 3000))) == []  # still unhealthy, recovery restarts
    assert step(state, 100, xids=(Xid(79, 2000), Xid(48, 3000))) == []
    assert step(state, 120, xids=(Xid(79, 2000), Xid(48, 3000))) == [(True, "recovered from: critical XID 79")]


def test_uncorrectable_ecc_and_temperature() -> None:
    state = HealthState()
    assert step(state, 0, ecc=0) == []
    assert step(state, 1, ecc=2) == [(False, "2 uncorrectable ECC error(s)")]
    other = HealthState()
    assert step(other, 0, temp=91.0) == [(False, "temperature 91 C at or above 90 C")]
    assert step(other, 1, temp=88.0) == []  # hysteresis
    assert step(other, 2, temp=84.0) == [(True, "recovered from: temperature 91 C at or above 90 C")]


def test_an_injected_xid_turns_the_gpu_unhealthy_in_the_runtime_and_in_prometheus(
    node: Node, exporter: Exporter, prometheus: Prometheus
) -> None:
    target = node.client.list_devices()[1]
    prometheus.wait('runtimekit_gpu_healthy{gpu="1"}', lambda r: r and r[0]["value"][1] == "1")
    node.client.inject_fault(pb.FAULT_KIND_XID, 1, xid=79)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and node.client.list_devices()[1].health != pb.HEALTH_UNHEALTHY:
        time.sleep(0.1)
    device = node.client.list_devices()[1]
    assert device.uuid == target.uuid
    assert device.health == pb.HEALTH_UNHEALTHY
    assert "XID 79" in device.health_reason
    prometheus.wait('runtimekit_gpu_healthy{gpu="1"}', lambda r: r and r[0]["value"][1] == "0")
    reason = prometheus.wait("runtimekit_gpu_unhealthy_reason", bool)
    assert "XID 79" in reason[0]["metric"]["reason"]
    prometheus.wait('runtimekit_gpu_xid_errors_total{gpu="1"}', lambda r: r and float(r[0]["value"][1]) >= 1)
    # the detector clears its own mark after recovery_seconds (2 s in this fixture)
    prometheus.wait('runtimekit_gpu_healthy{gpu="1"}', lambda r: r and r[0]["value"][1] == "1", timeout=30)
    changes = prometheus.wait("runtimekit_gpu_health_changes_total > 0", lambda r: len(r) == 2)
    assert {(c["metric"]["kind"], c["metric"]["healthy"]) for c in changes} == {("xid", "false"), ("xid", "true")}


def test_every_dashboard_query_runs(node: Node, exporter: Exporter, prometheus: Prometheus) -> None:
    node.client.allocate(
        "d", "p", "u", "c", [pb.GpuShare(uuid=node.client.list_devices()[0].uuid, core_milli=250, memory_mib=1024)]
    )
    prometheus.wait("runtimekit_allocation_core_ratio", bool)
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "lj-runtimekit-dashboard.json").read_text())
    # the per-container panels need the runtime's usage model, which this fixture's runtime has not:
    # tests/e2e/test_dashboards_e2e.py runs every panel on runtimekit up, where it has
    usage = ("runtimekit_container_", "runtimekit_gpu_unattributed_")
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"] if not any(u in t["expr"] for u in usage)]
    assert len(exprs) >= 15
    answered = 0
    for expr in exprs:
        concrete = expr.replace("$node", ".*").replace("$__rate_interval", "1m")
        assert not re.search(r"\$\w+", concrete), concrete
        result = prometheus.query(concrete)
        answered += bool(result)
    assert answered >= len(exprs) - 4  # a few (errors, health changes) are empty on a healthy node


@pytest.mark.parametrize("expr", ["runtimekit_node_gpu_core_allocated / runtimekit_node_gpu_core_capacity"])
def test_allocation_versus_capacity(node: Node, exporter: Exporter, prometheus: Prometheus, expr: str) -> None:
    node.client.allocate(
        "d", "p", "u", "c", [pb.GpuShare(uuid=node.client.list_devices()[0].uuid, core_milli=500, memory_mib=0)]
    )
    result = prometheus.wait(expr, lambda r: r and float(r[0]["value"][1]) > 0)
    assert float(result[0]["value"][1]) == pytest.approx(0.25)
