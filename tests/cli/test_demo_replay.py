"""The demo's trace-replay part, as `make demo` runs it: simulate's own flags (a new simulate flag
must not break the demo), every policy replayed, the JSON and the plot written.

The whole replay (the openb default pod list, four policies) takes tens of seconds, so it runs in the
slow suite; the default suite checks the arguments the demo hands simulate, with simulate's own parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from runtimekit.cli import demo


def demo_args(tmp_path: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)  # the demo's own command line, as `make demo` runs it
    return parser.parse_args(["--nodes", "2", "--out", str(tmp_path), "--skip-cluster"])


def test_the_replay_part_hands_simulate_arguments_its_parser_takes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    handed: list[argparse.Namespace] = []

    def run(args: argparse.Namespace) -> int:
        handed.append(args)
        return 0

    monkeypatch.setattr(demo.simulate, "run", run)
    assert demo.run(demo_args(tmp_path)) == 0
    [args] = handed
    assert sorted(args.policy.split(",")) == ["bestfit", "fgd", "packfrag", "random"]
    assert (args.json_out, args.plot_out) == (f"{tmp_path}/simulate.json", f"{tmp_path}/allocation.png")


@pytest.mark.slow
def test_the_replay_part_runs_every_policy_and_writes_its_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert demo.run(demo_args(tmp_path)) == 0
    record = json.loads((tmp_path / "simulate.json").read_text())
    assert sorted({r["policy"] for r in record["results"]}) == ["bestfit", "fgd", "packfrag", "random"]
    assert (tmp_path / "allocation.png").stat().st_size > 0
    assert "simulate.json" in capsys.readouterr().out
