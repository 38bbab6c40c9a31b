"""The demo's embedded-cluster part end to end: the example pods of examples/pods are placed and run on
simulated nodes, the tables show them, the pod that cannot fit waits with the scheduler's reason."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from runtimekit.cli import demo

pytestmark = pytest.mark.e2e


def test_the_example_pods_land_and_the_misfit_waits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)  # the demo's own command line, as `make demo` runs it
    args = parser.parse_args(["--nodes", "2", "--out", str(tmp_path), "--skip-replay"])
    assert demo.run(args) == 0
    out = capsys.readouterr().out
    names = [line.split("│")[1].strip() for line in out.splitlines() if line.count("│") == 5]
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") == 5}
    expected = ["gang-worker-0", "gang-worker-1", "gang-worker-2", "multi-gpu", "share", "too-big", "whole-gpu"]
    assert names == expected
    assert all("Running" in rows[n] for n in expected if n != "too-big")
    assert "Pending" in rows["too-big"]
    assert "4 whole: GPU" in rows["multi-gpu"]
    assert "30% 20 GiB" in rows["share"]
    assert "too-big waits: 0/2 nodes are available" in out
    assert "cluster stopped" in out


def test_the_example_manifests_are_what_the_demo_promises() -> None:
    objects = demo.load_manifests(demo.EXAMPLE_PODS)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert ("PodGroup", "gang") in kinds
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert all(p["spec"]["schedulerName"] == "lj-runtimekit-scheduler" for p in pods)
    grouped = [p for p in pods if p["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name") == "gang"]
    assert len(grouped) == 3
