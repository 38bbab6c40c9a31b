"""The chart with the real helm (scripts/fetch_tools.sh helm): `helm lint --strict` is clean, the values
schema rejects unknown and bad values with the value's path, and the chart's versions match the kit's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from deploy.manifests import CHART, DEFAULT_IMAGE, helm
from runtimekit import __version__


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


def test_helm_lint_strict_is_clean(home: Path) -> None:
    done = helm(home, "lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    findings = [line for line in done.stdout.splitlines() if re.match(r"\[(WARNING|ERROR)\]", line)]
    assert findings == []
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("flag", "path"),
    [
        pytest.param("protocol.labels.zone=x", "/protocol/labels", id="unknown-protocol-key"),
        pytest.param("protocol.memoryUnit=lots", "/protocol/memoryUnit", id="bad-memory-unit"),
        pytest.param("protocol.preset=koordinator", "/protocol/preset", id="unknown-preset"),
        pytest.param("protocol.rules.modelMatch=fuzzy", "/protocol/rules/modelMatch", id="unknown-model-rule"),
        pytest.param("protocol.resources.gpuReplicas=0", "/protocol/resources/gpuReplicas", id="no-replicas"),
        pytest.param("protocol.sockets.runtime=relative.sock", "/protocol/sockets/runtime", id="relative-socket"),
        pytest.param("runtime.isolation=cuda", "/runtime/isolation", id="bad-isolation"),
        pytest.param("runtime.backend=rocm", "/runtime/backend", id="bad-backend"),
        pytest.param("scheduler.replica=2", "/scheduler", id="misspelt-value"),
        pytest.param("namespace=Kube_System", "/namespace", id="bad-namespace"),
    ],
)
def test_the_values_schema_rejects_bad_values(home: Path, flag: str, path: str) -> None:
    done = helm(home, "template", "x", str(CHART), "--set", flag)
    assert done.returncode != 0
    assert f"at '{path}'" in done.stderr


def test_a_preset_keeps_the_runtime_socket_where_it_is(home: Path) -> None:
    done = helm(
        home,
        "template",
        "x",
        str(CHART),
        "--set",
        "protocol.preset=hami",
        "--set",
        "protocol.sockets.runtime=/run/x.sock",
    )
    assert done.returncode != 0
    assert "protocol.preset keeps the runtime socket at /run/lj-runtimekit/runtime.sock" in done.stderr


def test_chart_versions_are_the_kits() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__  # runtimekit/_version.py, the one place it is written
    assert DEFAULT_IMAGE.endswith(f"/runtimekit:{__version__}")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert f"{values['image']['repository']}:{chart['appVersion']}" == DEFAULT_IMAGE


def test_helm_packages_the_chart(home: Path, tmp_path: Path) -> None:
    done = helm(home, "package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "lj-runtimekit-0.1.0.tgz").exists()
