"""A new user's first day with the real kubectl against `runtimekit up` (scripts/day_one_kubectl.py):
every command behaves as on kube-apiserver but `kubectl exec`, which the embedded cluster refuses on
purpose (its containers are simulated and run no processes) with a message saying so."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.apiserver import KUBECTL_DISPATCHER

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(KUBECTL_DISPATCHER is None, reason="kubectl is not installed")]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "day_one_kubectl.py"


def test_the_commands_are_about_a_hundred_and_name_their_area() -> None:
    spec = importlib.util.spec_from_file_location("day_one_kubectl", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    assert len(module.STEPS) >= 100
    assert {s.area for s in module.STEPS} <= {"base", "openapi", "apply", "authz", "containers"}


def test_a_day_one_session_behaves_as_on_kube_apiserver(tmp_path: Path) -> None:
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True, timeout=900, check=False
    )
    print(done.stdout[-6000:])
    rows = json.loads(out.read_text())
    differs = [r for r in rows if not r["ok"]]
    assert [r["args"] for r in differs] == [r["args"] for r in rows if r["args"][0] == "exec"], done.stdout[-4000:]
    assert len(differs) <= 0.02 * len(rows), done.stdout[-4000:]
    assert done.returncode == 0
