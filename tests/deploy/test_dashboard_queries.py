"""The kit's Grafana dashboard (deploy/grafana/): every panel's PromQL parses (promtool, as a recording
rule), names only families the exporter serves, and its node variable reads a family with a node label.
Whether each panel returns series from a real Prometheus scraping `runtimekit up` is
tests/e2e/test_dashboards_e2e.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from fixtures.grafana import PanelQuery, load, panel_queries, substitute, variables
from fixtures.prometheus import ROOT, tool

DASHBOARD = ROOT / "deploy" / "grafana" / "lj-runtimekit-dashboard.json"
QUERIES = panel_queries(DASHBOARD)
FAMILY = re.compile(r"\b(runtimekit_[a-z_]+)")
EXPORTER_SOURCES = [*(ROOT / "src" / "runtimekit" / "exporter").glob("*.py")]


def test_every_panel_has_a_query_and_every_query_parses(tmp_path: Path) -> None:
    dashboard = load(DASHBOARD)
    titled = [p for p in dashboard["panels"] if p.get("type") != "row"]
    assert {f"panel {p['title']!r}" for p in titled} == {q.panel for q in QUERIES}
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"panel:{i}", "expr": q.query} for i, q in enumerate(QUERIES)]}
        ]
    }
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    done = subprocess.run(
        [str(tool("promtool")), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("query", QUERIES, ids=[f"{q.panel}:{q.expr}" for q in QUERIES])
def test_each_query_names_families_the_exporter_serves(query: PanelQuery) -> None:
    served = "\n".join(p.read_text() for p in EXPORTER_SOURCES)
    for family in FAMILY.findall(query.expr):
        base = family.removesuffix("_total")
        assert f'"{base}"' in served or f'"{family}"' in served, f"{query.panel}: {family} is not exported"


def test_the_node_variable_reads_a_family_with_a_node_label() -> None:
    dashboard = load(DASHBOARD)
    (node,) = [v for v in dashboard["templating"]["list"] if v["name"] == "node"]
    assert re.fullmatch(r"label_values\((runtimekit_\w+), node\)", node["query"])
    assert substitute('x{node=~"$node"}[$__rate_interval]', variables(dashboard)) == 'x{node=~".*"}[1m]'
