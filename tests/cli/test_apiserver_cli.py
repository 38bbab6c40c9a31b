"""`runtimekit apiserver` runs the embedded API server alone, writes a kubeconfig, stops on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml

from fixtures.apiserver import http_client


def test_apiserver_command_serves_and_stops(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtimekit.cli.main",
            "apiserver",
            "--port",
            "0",
            "--kubernetes-version",
            "1.30",
            "--kubeconfig-out",
            str(kubeconfig),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with http_client(url) as http:
            assert http.get("/version").json()["minor"] == "30"
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        assert (tmp_path / "state" / "apiserver.sqlite3").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_apiserver_command_rejects_bad_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runtimekit.cli.main", "apiserver", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "port must be 0-65535" in done.stderr
