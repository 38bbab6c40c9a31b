"""`runtimekit runtime`, `runtime-admin` and `device-plugin` as a user runs them: exit codes, output, signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.cli.main import main
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cli-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runtime_socket(short_dir: Path) -> Iterator[str]:
    options = RuntimeOptions(
        "simulated", str(short_dir / "rt.sock"), short_dir / "state", "node-a", simulate_gpus="2xT4"
    )
    daemon = RuntimeDaemon(build_runtime(options), options.socket_path, 0).start()
    yield options.socket_path
    daemon.stop()


def admin(capsys: pytest.CaptureFixture[str], socket: str, *args: str) -> tuple[int, object, str]:
    code = main(["runtime-admin", "--socket", socket, *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def test_runtime_admin(runtime_socket: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, device, _ = admin(capsys, runtime_socket, "inject", "xid", "--gpu", "1", "--xid", "79")
    assert code == 0
    assert (device["index"], device["health"], device["health_reason"]) == (1, "HEALTH_UNHEALTHY", "XID 79")  # type: ignore[index]
    code, device, _ = admin(capsys, runtime_socket, "inject", "ecc", "--gpu", "0", "--uncorrectable")
    assert device["health_reason"] == "uncorrectable ECC error"  # type: ignore[index]
    code, device, _ = admin(capsys, runtime_socket, "inject", "back", "--gpu", "0")
    assert device["health"] == "HEALTH_HEALTHY"  # type: ignore[index]
    code, devices, _ = admin(capsys, runtime_socket, "devices")
    assert [d["model"] for d in devices] == ["T4", "T4"]  # type: ignore[union-attr]
    code, status, _ = admin(capsys, runtime_socket, "disable", "--reason", "maintenance")
    assert (code, status["enabled"], status["reason"]) == (0, False, "maintenance")  # type: ignore[index]
    code, status, _ = admin(capsys, runtime_socket, "status")
    assert status["isolation"] == "none"  # type: ignore[index]
    code, version, _ = admin(capsys, runtime_socket, "version")
    assert "fault-injection" in version["features"]  # type: ignore[index]
    code, allocations, _ = admin(capsys, runtime_socket, "allocations")
    assert (code, allocations) == (0, [])


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["inject", "xid", "--gpu", "0"], 2, "inject xid needs --xid N"),
        (["inject", "lost", "--gpu", "7"], 1, "INVALID_ARGUMENT: no GPU with index 7"),
    ],
)
def test_runtime_admin_errors(
    runtime_socket: str, capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    got, _, err = admin(capsys, runtime_socket, *args)
    assert got == code
    assert message in err


def test_runtime_admin_without_a_runtime(short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["runtime-admin", "--socket", str(short_dir / "none.sock"), "--timeout", "0.3", "status"])
    err = capsys.readouterr().err
    assert code == 2
    assert "UNAVAILABLE" in err or "DEADLINE_EXCEEDED" in err


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runtimekit.cli.main", *args]


@pytest.mark.parametrize(
    "stop",
    [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT", marks=pytest.mark.slow)],
)
def test_runtime_daemon_serves_and_stops_cleanly_on_signals(short_dir: Path, stop: signal.Signals) -> None:
    socket = short_dir / "rt.sock"
    process = subprocess.Popen(
        _command(
            "runtime",
            "--backend",
            "simulated",
            "--simulate-gpus",
            "1xH200,1xL4",
            "--socket",
            str(socket),
            "--state-dir",
            str(short_dir / "state"),
            "--node-name",
            "n1",
            "--pod-resources-socket",
            "",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )
    try:
        with RuntimeClient(str(socket)) as client:
            assert client.wait_ready(20)
            assert [d.model for d in client.list_devices()] == ["H200", "L4"]
        process.send_signal(stop)
        output, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert f"protocol <defaults> (fingerprint {KitProtocol.default().fingerprint})" in output
    assert "runtime stopped" in output
    assert not socket.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runtime", "--backend", "simulated", "--simulate-gpus", "2xB300"], "unknown GPU model 'B300'"),
        (["device-plugin", "--memory-unit", "1.5Gi"], "--memory-unit: '1.5Gi' is not a quantity"),
        (["device-plugin", "--memory-unit", "1000k"], "--memory-unit: '1000k' must be a positive whole number of MiB"),
    ],
)
def test_bad_flags_exit_2(short_dir: Path, caplog: pytest.LogCaptureFixture, args: list[str], message: str) -> None:
    extra = ["--socket", str(short_dir / "x.sock"), "--state-dir", str(short_dir / "s")] if args[0] == "runtime" else []
    assert main([*args, *extra]) == 2
    assert message in caplog.text


@pytest.mark.parametrize(
    ("flag", "mib"),
    [
        pytest.param(None, 1024, id="default-the-protocols"),
        pytest.param("512Mi", 512, id="smaller-than-the-protocols"),
        pytest.param("2Gi", 2048, id="larger-than-the-protocols"),
    ],
)
def test_the_device_plugins_memory_unit_may_differ_from_the_protocols(flag: str | None, mib: int) -> None:
    """Each node's plugin sizes its gpu-memory devices with its own unit and publishes it on its node."""
    from runtimekit.cli.device_plugin import memory_unit

    assert memory_unit(KitProtocol.default(), flag) == mib
