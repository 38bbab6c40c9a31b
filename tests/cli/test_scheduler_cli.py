"""`runtimekit scheduler` reads Volcano's command line as vc-scheduler does (pflag booleans, Go
durations, klog's flags, stray arguments), with Volcano's meanings, and `--check-conf` prints every
problem of a conf at once through the real CLI in a subprocess.

The Volcano facts used here: its options.go (flag names and defaults: --schedule-period 1s,
--default-queue default, --listen-address :8080, --healthz-address :11251, --kube-api-qps/burst
2000, --minimum-feasible-nodes 100, --minimum-percentage-nodes-to-find 5, --percentage-nodes-to-find
0), and the arguments its Helm chart's scheduler Deployment passes (including the stray `2>&1`)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runtimekit.base.keyring import ensure_key_folder
from runtimekit.cli import scheduler as cli
from runtimekit.cli.main import parse_command
from runtimekit.cli.scheduler_flags import FlagError, go_bool, go_duration, ignored_flags, normalise
from runtimekit.scheduler.build import KubeConnection, build_scheduler
from runtimekit.scheduler.framework.sampling import NodeSampling
from runtimekit.scheduler.server import Scheduler

ROOT = Path(__file__).resolve().parents[2]
VOLCANO_DEFAULT_CONF = ROOT / "examples" / "scheduler" / "volcano-scheduler.conf"


def parse(*argv: str) -> argparse.Namespace:
    return parse_command(cli, "scheduler", list(argv))


@contextmanager
def built(args: argparse.Namespace) -> Iterator[Scheduler]:
    """The scheduler the flags build (not started), with an API server address it never calls."""
    scheduler = build_scheduler(replace(cli.scheduler_config(args), kube=KubeConnection(master="http://127.0.0.1:9")))
    try:
        yield scheduler
    finally:
        scheduler.stop()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1s", 1.0, id="seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1m30s", 90.0, id="compound"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("0", 0.0, id="bare-zero"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("250us", 0.00025, id="microseconds"),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1", "s", "1x", "", "1s2"], ids=["no-unit", "no-number", "bad-unit", "empty", "tail"])
def test_bad_go_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        go_duration(text)


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("T", True), ("False", False), ("0", False), ("f", False)]
)
def test_go_booleans(text: str, value: bool) -> None:
    assert go_bool(text) is value


@pytest.mark.parametrize(
    ("argv", "args", "warned"),
    [
        pytest.param(["--enable-healthz"], ["--enable-healthz=true"], [], id="bare-boolean"),
        pytest.param(["--leader-elect=0"], ["--leader-elect=false"], [], id="boolean-value"),
        pytest.param(["--leader-elect", "false"], ["--leader-elect=true", "false"], [], id="pflag-no-space-value"),
        pytest.param(["--log_dir", "/tmp/x", "-v=3"], ["-v=3"], ["--log-dir"], id="klog-underscore-and-value"),
        pytest.param(["--priority-class=true"], [], [], id="agreeing-value-quiet"),
        pytest.param(["--priority-class=false"], [], ["--priority-class"], id="disagreeing-value"),
        pytest.param(["--scheduler_conf=x"], ["--scheduler-conf=x"], [], id="underscores-are-dashes"),
        pytest.param(
            ["--node-worker-threads=20", "--csi-storage"], [], ["--node-worker-threads", "--csi-storage"], id="ignored"
        ),
    ],
)
def test_pflag_syntax_is_normalised(argv: list[str], args: list[str], warned: list[str]) -> None:
    out = normalise(argv)
    assert out.args == args
    assert [w.split(":")[0] for w in out.warnings] == warned


def test_a_bad_boolean_is_refused_as_pflag_words_it() -> None:
    with pytest.raises(FlagError, match='invalid argument "yes" for "--enable-metrics" flag'):
        normalise(["--enable-metrics=yes"])


def test_every_ignored_flag_says_why() -> None:
    assert all(why for why in ignored_flags().values())


def test_volcanos_chart_arguments_start_the_scheduler_with_their_meanings(tmp_path: Path) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(VOLCANO_DEFAULT_CONF.read_text())
    args = parse(
        "--logtostderr",
        f"--scheduler-conf={conf}",
        "--scheduler-name=volcano",
        "--scheduler-name=gpu-sched",
        "--enable-healthz=true",
        "--enable-metrics=true",
        "--leader-elect=false",
        "--leader-elect-resource-namespace=volcano-system",
        "--kube-api-qps=1500",
        "--kube-api-burst=1800",
        "--schedule-period=1s",
        "--node-worker-threads=20",
        "--percentage-nodes-to-find=30",
        "--feature-gates=SchedulingGatesQueueAdmission=true",
        "-v=3",
        "2>&1",
    )
    with built(args) as scheduler:
        protocol, framework, options = scheduler.protocol, scheduler.framework, scheduler.options
    assert framework.action_names == ("enqueue", "allocate", "backfill")
    assert options.scheduler_names == (protocol.scheduler_name, "volcano", "gpu-sched")  # ours is always taken
    assert options.period == 1.0
    assert not options.leader_elect
    assert options.lease_namespace == "volcano-system"
    assert options.healthz_address == ":11251"
    assert options.metrics_address == ":8080"
    assert options.node_sampling == NodeSampling(30, 5, 100)
    assert options.default_queue == "default"
    assert (args.kube_api_qps, args.kube_api_burst, args.verbosity) == (1500, 1800, 3)
    assert cli.scheduler_config(args).kube == KubeConnection(qps=1500, burst=1800)
    warned = [w.split(":")[0] for w in args.flag_warnings]
    assert warned == [
        "--node-worker-threads",
        "--feature-gates",
        "ignoring the stray argument '2>&1' (Volcano ignores it too)",
    ]


def test_defaults_keep_the_kits_behaviour(tmp_path: Path) -> None:
    args = parse("--assignment-keys", str(ensure_key_folder(tmp_path / "keys")))  # the built-in conf has gpushare
    with built(args) as scheduler:
        protocol, options = scheduler.protocol, scheduler.options
    assert options.signer is not None
    assert options.scheduler_names == (protocol.scheduler_name,)
    assert options.period == 0.05
    assert options.node_sampling is None  # every feasible node is scored unless asked otherwise
    assert options.healthz_address is None
    assert options.metrics_address is None
    assert options.lease_name == protocol.scheduler_name
    assert options.allow_conf_without_gpu_plugin is False  # a reload that drops the GPU plugins is refused
    assert args.flag_warnings == []


@pytest.mark.parametrize(("argv", "allowed"), [(["--allow-conf-without-gpu-plugin"], True), ([], False)])
def test_the_opt_in_to_a_conf_without_gpu_plugins_reaches_the_server(
    tmp_path: Path, argv: list[str], allowed: bool
) -> None:
    args = parse("--assignment-keys", str(ensure_key_folder(tmp_path / "keys")), *argv)
    with built(args) as scheduler:
        assert scheduler.options.allow_conf_without_gpu_plugin is allowed


def test_unknown_flags_are_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--no-such-flag=1")
    assert "unrecognized arguments: --no-such-flag=1" in capsys.readouterr().err


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "scheduler", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


BAD_CONF = """\
actions: "enqueue, allocate, shufle"
tiers:
- plugins:
  - name: priority
    enabledJobOrder: true
  - name: nosuch
- plugins:
  - name: gpushare
    arguments: {gpushare.policy: nope}
  - name: binpack
    arguments: {binpack.weight: heavy}
extra: 1
"""


def test_check_conf_prints_every_problem_at_once_and_fails(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD_CONF)
    done = run_cli("--check-conf", str(conf))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    expected = [
        "unknown key 'extra'",
        "tiers[0].plugins[0] (priority): unknown key 'enabledJobOrder'",
        "actions: shufle: unknown action 'shufle'",
        "tiers[0].plugins[1] (nosuch): unknown plugin 'nosuch'",
        "tiers[1].plugins[0] (gpushare): gpushare: unknown policy 'nope'",
        "tiers[1].plugins[1] (binpack): binpack: argument 'binpack.weight' must be",
    ]
    assert len(errors) == len(expected), lines
    for line, fragment in zip(errors, expected, strict=True):
        assert fragment in line
    # no guess about GPU allocation while a plugin failed to build
    assert lines[-1] == f"{conf}: {len(expected)} error(s), 0 warning(s)"


def test_check_conf_warns_that_gpu_pods_stay_pending_with_volcanos_default_conf() -> None:
    done = run_cli("--check-conf", str(VOLCANO_DEFAULT_CONF))
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3
    assert all("pods asking for them will stay Pending" in w for w in warnings)
    assert any("whole GPUs (aliyun.com/gpu)" in w for w in warnings)
    assert any("MIG slices" in w for w in warnings)


def configmap(name: str, data: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "x"}, "data": data}


@pytest.mark.parametrize(
    ("documents", "source"),
    [
        pytest.param([configmap("vs", {"volcano-scheduler.conf": "VOLCANO"})], "key volcano-scheduler.conf", id="key"),
        pytest.param([configmap("vs", {"my.conf": "VOLCANO"})], "key my.conf", id="only-key"),
        pytest.param(
            [
                configmap("admission", {"a.conf": "x", "b.conf": "y"}),
                {"kind": "Service"},
                configmap("vs", {"volcano-scheduler.conf": "VOLCANO"}),
            ],
            "ConfigMap vs",
            id="rendered-chart",
        ),
    ],
)
def test_check_conf_reads_a_whole_configmap(tmp_path: Path, documents: list[dict[str, object]], source: str) -> None:
    text = VOLCANO_DEFAULT_CONF.read_text()
    for doc in documents:
        data = doc.get("data")
        if isinstance(data, dict):
            doc["data"] = {k: (text if v == "VOLCANO" else v) for k, v in data.items()}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    done = run_cli("--check-conf", str(path))
    assert done.returncode == 0, done.stdout
    assert source in done.stdout.splitlines()[-1]
    assert done.stdout.splitlines()[-1].endswith("0 error(s), 3 warning(s)")


def test_a_configmap_without_a_usable_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(configmap("vs", {"a.conf": "x", "b.conf": "y"})))
    done = run_cli("--check-conf", str(path))
    assert done.returncode == 1
    assert "no single ConfigMap with a 'volcano-scheduler.conf' key or only one key: vs (a.conf, b.conf)" in done.stdout


def test_start_up_refuses_a_conf_with_errors_naming_every_one(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD_CONF)
    done = run_cli(f"--scheduler-conf={conf}", "--master=http://127.0.0.1:9")
    assert done.returncode == 2
    assert done.stderr.count("error: ") == 6, done.stderr


def test_version_is_printed() -> None:
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("runtimekit scheduler ")


def documented_flags() -> set[str]:
    page = (ROOT / "docs" / "user-guide" / "coming-from-volcano.md").read_text()
    table = page[page.index("| Volcano flag |") : page.index("**Feasible nodes.**")]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ")]
    return {flag.lstrip("-") for row in rows for flag in re.findall(r"`(-{1,2}[a-z][a-z0-9_-]*)`", row)}


def test_the_coming_from_volcano_page_lists_every_flag_the_cli_reads() -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    known = {o.lstrip("-") for action in parser._actions for o in action.option_strings} | set(ignored_flags())
    documented = documented_flags()
    assert documented - known == set()  # every flag on the page is read
    assert set(ignored_flags()) - documented == set()  # every flag accepted without effect says so there


def test_a_lease_shorter_than_its_renew_deadline_is_refused() -> None:
    from runtimekit.scheduler.framework.arguments import ArgumentError

    with pytest.raises(ArgumentError, match="must exceed --leader-elect-renew-deadline"):
        cli.scheduler_config(parse("--leader-elect", "--leader-elect-lease-duration=5s"))
