"""A new user's first day with the real kubectl against `runtimekit up` (scripts/day_one_kubectl.py):
every command of the API server's own area behaves as on kube-apiserver; the commands that need
another part of issue 34 (OpenAPI, server-side apply, RBAC and bootstrap objects, simulated
containers) are counted and printed, and pass once those parts are merged."""

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
    assert {s.area for s in module.STEPS} <= {"base", "openapi34", "ssa34", "rbac34", "kubelet34"}


def test_a_day_one_session_behaves_as_on_kube_apiserver(tmp_path: Path) -> None:
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True, timeout=900, check=False
    )
    print(done.stdout[-6000:])
    rows = json.loads(out.read_text())
    base = [r for r in rows if r["area"] == "base"]
    assert [r for r in base if not r["ok"]] == [], done.stdout[-4000:]
    assert done.returncode == 0
