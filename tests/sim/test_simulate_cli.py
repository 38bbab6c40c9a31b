"""`runtimekit simulate` end to end on a small trace, and its handling of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtimekit.cli.main import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"node-{i},32000,131072,{g},{m}\n" for i, (g, m) in enumerate([(2, "T4"), (2, "T4"), (4, "V100M16"), (1, "A10")])
)
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n" + "".join(
    f"pod-{i:03d},{2000 + 100 * (i % 5)},4096,{n},{milli},{spec},LS\n"
    for i, (n, milli, spec) in enumerate(
        [(1, 500, ""), (1, 1000, ""), (2, 1000, ""), (0, 0, ""), (1, 250, "T4"), (1, 700, "V100M16|A10")] * 3
    )
)


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    return nodes, pods


def test_simulate_writes_json_csv_plot_and_a_table(
    trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = trace
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--policy",
            "fgd,bestfit,random",
            "--seeds",
            "1-3",
            "--json",
            str(out / "r.json"),
            "--csv",
            str(out / "r.csv"),
            "--plot",
            str(out / "r.png"),
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads((out / "r.json").read_text())
    assert set(report) == {
        "runtimekit_version",
        "nodes_file",
        "pods_file",
        "tune",
        "through_claims",
        "results",
        "bounds",
    }
    assert report["bounds"] == []  # only with --bound
    assert report["tune"] == 1.3
    runs = report["results"]
    assert [(r["policy"], r["seed"]) for r in runs] == [(p, s) for s in (1, 2, 3) for p in ("fgd", "bestfit", "random")]
    for run in runs:
        assert set(run) == {"policy", "seed", "columns", "arrived_pods", "failed_pods", "total_gpus", "seconds"}
        assert run["total_gpus"] == 9
        assert len(run["columns"]) == 131
        assert 0 <= run["failed_pods"] < run["arrived_pods"]
        values = [v for v in run["columns"].values() if v is not None]
        assert max(values) <= 100.0
    # same seed, same arrivals: every policy sees the same number of pods
    assert len({(r["seed"], r["arrived_pods"]) for r in runs}) == 3
    assert (out / "r.csv").read_text().count("\n") == 10
    assert (out / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "fgd" in table
    assert "@130" in table
    assert "[" in table


@pytest.mark.parametrize(
    ("pods_text", "message"),
    [
        pytest.param(
            "name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", "pods.csv:1: missing column 'gpu_milli'", id="column"
        ),
        pytest.param(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,x,1\n",
            "pods.csv:2: column 'num_gpu' is not a number",
            id="not-number",
        ),
        pytest.param(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1\nq,-5,1,1,1\n",
            "pods.csv:3: column 'cpu_milli' must not be negative",
            id="negative",
        ),
        pytest.param("", "pods.csv: the file is empty", id="empty"),
        pytest.param("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "no data rows", id="header-only"),
        pytest.param(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\np,1,1,1,1,100,99\n",
            "pods.csv:2: pod 'p' is deleted before it is created",
            id="deleted-before-created",
        ),
    ],
)
def test_bad_input_is_one_clear_error_and_writes_nothing(
    trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], pods_text: str, message: str
) -> None:
    nodes, pods = trace
    pods.write_text(pods_text)
    out = tmp_path / "r.json"
    assert (
        main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--json", str(out), "--quiet"])
        == 2
    )
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_default_policy_is_packfrag(trace: tuple[Path, Path], tmp_path: Path) -> None:
    """Without --policy the simulator replays the gpushare plugin's default policy, packfrag (it
    allocates more than fgd on every openb list: docs/results/better-than-fgd.md)."""
    nodes, pods = trace
    out = tmp_path / "r.json"
    args = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--json", str(out), "--quiet"]
    assert main(args) == 0
    assert [r["policy"] for r in json.loads(out.read_text())["results"]] == ["packfrag"]


def test_unknown_gpu_model_in_spec_is_a_warning_with_the_line(
    trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = trace
    pods.write_text(PODS + "pod-999,1000,1024,1,500,H800,LS\n")
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {pods}:20: pod pod-999" in err


def test_bound_beside_the_policies_in_json_table_and_plot(
    trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--bound adds, per seed and bounded column, an upper bound no policy's column exceeds and the
    value of a checked packing below it."""
    nodes, pods = trace
    out = tmp_path / "out"
    args = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd,packfrag", "--seeds", "1,2"]
    args += ["--bound", "0-130", "--json", str(out / "r.json"), "--plot", str(out / "r.png"), "--quiet"]
    assert main(args) == 0
    report = json.loads((out / "r.json").read_text())
    assert [b["seed"] for b in report["bounds"]] == [1, 2]
    for bound in report["bounds"]:
        # nine GPUs: a pod moves arrivals by several points, so only some columns have events
        filled = {c for r in report["results"] if r["seed"] == bound["seed"] for c, v in r["columns"].items() if v}
        assert set(bound["columns"]) == filled
        for column, cell in bound["columns"].items():
            assert cell["lower"] <= cell["upper"] <= 100.0
            for run in report["results"]:
                if run["seed"] == bound["seed"]:
                    assert run["columns"][column] <= cell["upper"] + 0.01  # events and columns are rounded
    assert (out / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "offline bound" in capsys.readouterr().out


def test_bad_arguments(trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = trace
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "nosuch", "--quiet"]) == 2
    assert "unknown policy 'nosuch'" in capsys.readouterr().err
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "a-b", "--quiet"]) == 2
    assert "seeds must look like" in capsys.readouterr().err
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--bound", "x", "--quiet"]) == 2
    assert "bound columns must look like" in capsys.readouterr().err
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--bound", "140", "--quiet"]) == 2
    assert "bound columns must be in 0..130" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-2", "x"])
def test_jobs_must_be_a_positive_count(trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str], jobs: str) -> None:
    nodes, pods = trace
    with pytest.raises(SystemExit) as exited:
        main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--jobs", jobs, "--quiet"])
    assert exited.value.code == 2
    assert f"argument --jobs: must be a whole number of at least 1, got {jobs!r}" in capsys.readouterr().err
