"""benchmarks/seed_rows.py: one-seed better_than_fgd.py runs merged into one run's rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture
def seed_rows(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("seed_rows")


def one_seed_run(path: Path, seed: str, name: str, fgd: float, dip: float, ratio: float) -> str:
    """A run of one seed: fgd at `fgd` on every column, packfrag 0.2 ahead but `dip` at column 97."""
    columns = [str(c) for c in range(50, 131)]
    mine = {c: fgd + (dip if c == "97" else 0.2) for c in columns}

    def cell(v: float) -> dict[str, float]:
        return {"mean": v, "min": v, "max": v}

    row: dict[str, Any] = {
        "list": name,
        "cells": {"fgd": {c: cell(fgd) for c in columns}, "packfrag": {c: cell(mine[c]) for c in columns}},
        "delta": {c: cell(round(mine[c] - fgd, 3)) for c in columns},
        "time_ratio": ratio,
    }
    path.write_text(json.dumps({"seeds": seed, "rows": [row]}))
    return str(path)


def test_merged_rows_are_the_mean_min_and_max_over_the_seeds(
    seed_rows: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [
        one_seed_run(tmp_path / "a.json", "42", "x", 90.0, -0.3, 1.0),
        one_seed_run(tmp_path / "b.json", "43", "x", 91.0, 0.1, 2.0),
        one_seed_run(tmp_path / "c.json", "44", "x", 92.0, 0.5, 3.0),  # not among the seeds asked
    ]
    monkeypatch.setattr("sys.argv", ["seed_rows.py", *runs, "--lists", "x,y", "--seeds", "42-43"])
    assert seed_rows.main() == 0
    out = capsys.readouterr()
    (row,) = json.loads(out.out)["rows"]
    assert row["seeds"] == [42, 43]
    assert row["delta"]["97"] == {"mean": -0.1, "min": -0.3, "max": 0.1}
    assert row["delta"]["100"] == {"mean": 0.2, "min": 0.2, "max": 0.2}
    assert row["cells"]["fgd"]["100"] == {"mean": 90.5, "min": 90.0, "max": 91.0}
    assert (row["worst_column"], row["worst_delta"], row["time_ratio"]) == ("97", -0.1, 1.5)
    assert "y: no run" in out.err


def test_a_run_over_several_seeds_is_refused(seed_rows: ModuleType, tmp_path: Path) -> None:
    run = one_seed_run(tmp_path / "a.json", "42-43", "x", 90.0, 0.0, 1.0)
    with pytest.raises(SystemExit, match="only runs of one seed"):
        seed_rows.per_seed([run])
