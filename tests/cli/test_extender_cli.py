"""`runtimekit extender`: its flags become the extender's config (the scheduler's conf, protocol, key and
leader election; where to serve), bad flags are refused naming the flag, a conf without a key is
refused as the scheduler refuses it, and `--print-kube-scheduler-config` prints the configuration
kube-scheduler needs, through the real CLI in a subprocess."""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runtimekit.base.keyring import ensure_key_folder
from runtimekit.cli import extender as cli
from runtimekit.cli.main import parse_command
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import KubeConnection, build_extender
from runtimekit.scheduler.extender.schedconfig import kube_scheduler_config
from runtimekit.scheduler.framework.arguments import ArgumentError

P = KitProtocol.default()


def parse(*argv: str) -> argparse.Namespace:
    return parse_command(cli, "extender", list(argv))


def test_the_flags_become_the_extenders_config(tmp_path: Path) -> None:
    keys = ensure_key_folder(tmp_path / "keys")
    args = parse(
        "--listen=127.0.0.1:0",
        "--url-prefix=/gpu",
        f"--assignment-keys={keys}",
        "--leader-elect",
        "--lease-name=ext",
        "--leader-elect-lease-duration=20s",
        "--leader-elect-renew-deadline=15s",
        "--scheduler-name=default-scheduler",
        "--bind-wait=500ms",
    )
    config = cli.extender_config(args)
    assert (config.listen, config.url_prefix, config.bind_wait) == ("127.0.0.1:0", "/gpu", 0.5)
    election = config.scheduler.leader_election
    assert (election.enabled, election.name, election.lease_seconds, election.renew_deadline) == (True, "ext", 20, 15)
    extender = build_extender(
        replace(config, scheduler=replace(config.scheduler, kube=KubeConnection(master="http://127.0.0.1:9")))
    )
    try:
        assert extender.names == (P.scheduler_name, "default-scheduler")
        assert extender.options.signer is not None
        assert extender.options.lease_name == "ext"
        assert [p.name for p in extender.framework.plugins.every.flat] == ["gpushare", "mig"]
    finally:
        extender.stop()


def test_without_a_lease_name_the_extenders_own_is_held() -> None:
    config = cli.extender_config(parse("--leader-elect=true", "--listen=127.0.0.1:0", "--assignment-keys=/nonexistent"))
    assert config.scheduler.leader_election.name is None  # build_extender names it lj-runtimekit-extender


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--url-prefix=gpu"], "--url-prefix 'gpu'", id="prefix"),
        pytest.param(["--bind-wait=-1s"], "--bind-wait", id="bind-wait"),
        pytest.param(["--leader-elect-renew-deadline=20s"], "--leader-elect-lease-duration", id="lease"),
        pytest.param(["--kube-api-burst=0"], "--kube-api-burst", id="burst"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        cli.extender_config(parse(*argv))


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "extender", *argv], capture_output=True, text=True, check=False
    )


def test_a_gpu_conf_without_a_key_is_refused() -> None:
    done = run("--master=http://127.0.0.1:9", "--listen=127.0.0.1:0")
    assert done.returncode == 2
    assert "--assignment-keys is required" in done.stderr


def test_print_kube_scheduler_config() -> None:
    url = "http://lj-runtimekit-extender.kube-system.svc:8888/lj-runtimekit"
    done = run("--print-kube-scheduler-config", url)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == kube_scheduler_config(P, url)
    names = run("--print-kube-scheduler-config", url, "--node-cache-capable=false")
    assert yaml.safe_load(names.stdout)["extenders"][0]["nodeCacheCapable"] is False
