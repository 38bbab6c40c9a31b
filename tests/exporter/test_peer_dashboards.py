"""The peers' Grafana dashboards users already run, as data (tests/data/dashboards: NVIDIA's
dcgm-exporter dashboard, HAMi's vGPU dashboard): every query of every panel and variable parses
(`promtool check rules`, each query a recording rule, Grafana's variables substituted), and every
metric it reads is one the exporter writes in that peer's mode, over simulated GPUs with shared pods
whose usage the runtime reads; the one it cannot write is named here and in docs/user-guide/exporter.md,
with why."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.conftest import Node, tool
from exporter.test_compat_dcgm import scrape
from exporter.test_metrics import allocate
from fixtures.dashboards import DATA, metric_names, queries, rules_file, substitute
from runtimekit.exporter.compat_dcgm import OMITTED

DASHBOARDS = {"dcgm-exporter-dashboard.json": "dcgm", "hami-vgpu-dashboard.json": "hami"}
# Read by a dashboard but not written, and why (docs/user-guide/exporter.md says the same).
NOT_WRITTEN: dict[str, set[str]] = {
    "dcgm": {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},  # profiling (DCP) metric: DCGM's profiling module, not NVML
    "hami": set(),
}


def test_the_dashboards_are_all_here() -> None:
    assert sorted(p.name for p in DATA.glob("*.json")) == sorted(DASHBOARDS)


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_query_parses(name: str, tmp_path: Path) -> None:
    found = queries(DATA / name)
    assert len(found) >= 8
    rules = rules_file(found, tmp_path / "rules.yml")
    result = subprocess.run(
        [str(tool("promtool")), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(found)} rules found" in result.stdout


def test_a_query_that_does_not_parse_is_caught(tmp_path: Path) -> None:
    broken = tmp_path / "board.json"
    broken.write_text('{"panels": [{"title": "t", "targets": [{"expr": "sum(rate(x[$__rate_interval])"}]}]}')
    rules = rules_file(queries(broken), tmp_path / "rules.yml")
    result = subprocess.run(
        [str(tool("promtool")), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_metric_a_dashboard_reads_is_written(name: str, usage_node: Node) -> None:
    gpus = usage_node.client.list_devices()
    allocate(usage_node.client, "a", gpus[0].uuid, 300, 8192)
    allocate(usage_node.client, "b", gpus[0].uuid, 200, 4096)
    mode = DASHBOARDS[name]
    written = {f.name for f in text_string_to_metric_families(scrape(usage_node, (mode,)))}
    read = set().union(*(metric_names(q.promql) for q in queries(DATA / name)))
    assert read - written == NOT_WRITTEN[mode]
    assert NOT_WRITTEN["dcgm"] <= set(OMITTED)


@pytest.mark.parametrize(
    ("promql", "names"),
    [
        ('avg(DCGM_FI_DEV_GPU_TEMP{instance=~"x", gpu=~"x"})', {"DCGM_FI_DEV_GPU_TEMP"}),
        ('a and on (device_uuid) b{node=~"x"}', {"a", "b"}),
        ("sum by (node) (rate(c_total[1m])) / ignoring(zone) d offset 5m", {"c_total", "d"}),
        ('topk(10, e{namespace=~"x"}) * 1e6 > bool 3', {"e"}),
        ('{__name__="f"}', {"f"}),
    ],
)
def test_metric_names_of_a_query(promql: str, names: set[str]) -> None:
    assert metric_names(promql) == names


def test_grafana_variables_are_substituted() -> None:
    assert substitute('rate(x{gpu=~"$gpu", i="${instance:regex}"}[$__rate_interval]) [[node]]') == (
        'rate(x{gpu=~"x", i="x"}[1m]) x'
    )
