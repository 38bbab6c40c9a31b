"""The demo's trace-replay part, as `make demo` runs it: simulate's own flags (a new simulate flag
must not break the demo), every policy replayed, the JSON and the plot written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from runtimekit.cli import demo


def test_the_replay_part_runs_every_policy_and_writes_its_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)  # the demo's own command line, as `make demo` runs it
    args = parser.parse_args(["--nodes", "2", "--out", str(tmp_path), "--skip-cluster"])
    assert demo.run(args) == 0
    record = json.loads((tmp_path / "simulate.json").read_text())
    assert sorted({r["policy"] for r in record["results"]}) == ["bestfit", "fgd", "packfrag", "random"]
    assert (tmp_path / "allocation.png").stat().st_size > 0
    assert "simulate.json" in capsys.readouterr().out
