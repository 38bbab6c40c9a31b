"""Socket paths too long for a unix socket address (more than 107 bytes) are refused when a component
starts, naming the flag or setting and the limit: exit code 2, one line, no traceback, nothing
served. (Without the check the runtime's gRPC server failed to add its port and the clients
retried for ever.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtimekit.protocol import ProtocolError, load_protocol

LONG = "/tmp/" + "s" * 295  # 300 bytes
LIMIT = "a unix socket path may be at most 107 bytes"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "runtimekit.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        pytest.param(["runtime", "--backend", "simulated", "--socket", LONG], "--socket", id="runtime"),
        pytest.param(["runtime", "--backend", "simulated", "--exporter-socket", LONG], "--exporter-socket", id="exp"),
        pytest.param(["runtime", "--backend", "simulated", "--pod-resources-socket", LONG], "--pod-resources-socket"),
        pytest.param(["device-plugin", "--runtime-socket", LONG], "--runtime-socket", id="device-plugin"),
        pytest.param(["device-plugin", "--pod-resources-socket", LONG], "--pod-resources-socket", id="dp-podres"),
        pytest.param(["exporter", "--runtime-socket", LONG], "--runtime-socket", id="exporter"),
        pytest.param(["job-agent", "--action", "enable", "--socket", LONG], "--socket", id="job-agent"),
        pytest.param(["runtime-admin", "--socket", LONG, "status"], "--socket", id="runtime-admin"),
    ],
)
def test_a_socket_flag_too_long_is_a_usage_error_naming_the_flag(args: list[str], flag: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if LIMIT in line]
    assert len(lines) == 1, result.stderr
    assert f"argument {flag}: '/tmp/sss" in lines[0]
    assert "is 300 bytes long" in lines[0]


def test_the_runtime_refuses_a_socket_whose_exporter_socket_would_not_fit(tmp_path: Path) -> None:
    folder = Path("/tmp") / tmp_path.name
    socket = str(folder / ("r" * (100 - len(str(folder)) - 1)))  # fits; exporter/ beside it does not
    assert len(socket) == 100
    result = run_cli("runtime", "--backend", "simulated", "--socket", socket, "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "cannot start the runtime: the runtime's exporter socket: " in result.stderr
    assert "is 109 bytes long; " + LIMIT in result.stderr
    assert not Path(socket).exists()


def test_the_device_plugin_refuses_a_plugin_dir_too_long_for_kubelet_sock(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "current").write_text("k" * 40)
    result = run_cli("device-plugin", "--plugin-dir", LONG, "--assignment-keys", str(keys))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--plugin-dir: '/tmp/sss" in result.stderr
    assert "is 313 bytes long; " + LIMIT in result.stderr


def test_a_protocol_whose_runtime_socket_is_too_long_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "protocol.yaml"
    path.write_text(f"sockets.runtime: {LONG}\n")
    with pytest.raises(ProtocolError) as refused:
        load_protocol(path)
    assert "sockets.runtime" in str(refused.value)
    assert LIMIT in str(refused.value)
