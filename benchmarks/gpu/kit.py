"""Run the kit's node side as a user would, for the GPU checks: `runtimekit runtime` (nvml backend) and
`runtimekit exporter` as their own processes, each from the kit's command line, over sockets in a
scratch folder; a gRPC client of the runtime; a scrape of the exporter's /metrics.

`KitNode(folder, isolation)` starts both (the runtime starts the MPS control daemon itself when the
isolation is mps) and `close()` stops them; `close()` also quits the MPS control daemon, which the
runtime leaves running on purpose (a runtime restart must not end its clients' work).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.runtime.mps import MpsDaemon

LAUNCH = "import sys; from runtimekit.cli.main import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KitNode:
    """See the module docstring. `hami_lib_dir`: where HAMi-core's libvgpu.so is (isolation hami-core);
    `backend` simulated for a dry run of a check's own logic on a machine without a GPU."""

    def __init__(
        self, folder: Path, isolation: str, hami_lib_dir: str = "/usr/local/vgpu", backend: str = "nvml"
    ) -> None:
        self.folder = folder
        self.isolation = isolation
        folder.mkdir(parents=True, exist_ok=True)
        self.socket = str(folder / "runtime.sock")
        self.exporter_socket = str(folder / "exporter.sock")
        self.pipe_dir = str(folder / "mps-pipe")
        self.log_dir = str(folder / "mps-log")
        self.port = free_port()
        runtime_args = [
            "runtime",
            f"--backend={backend}",
            *(["--simulate-gpus=1xH200"] if backend == "simulated" else []),
            f"--isolation={isolation}",
            f"--socket={self.socket}",
            f"--exporter-socket={self.exporter_socket}",
            f"--state-dir={folder / 'state'}",
            f"--mps-pipe-dir={self.pipe_dir}",
            f"--mps-log-dir={self.log_dir}",
            f"--hami-lib-dir={hami_lib_dir}",
            "--pod-resources-socket=",
            "--node-name=gpu-check",
            "--reconcile-interval=0",
        ]
        self._runtime = self._spawn("runtime", runtime_args)
        self.client = RuntimeClient(self.socket, timeout_s=20.0)
        if not self.client.wait_ready(60.0):
            self.close()
            raise RuntimeError(f"the runtime did not serve in 60 s; its log: {self.log('runtime')[-2000:]}")
        exporter_args = [
            "exporter",
            f"--runtime-socket={self.exporter_socket}",
            f"--listen=127.0.0.1:{self.port}",
        ]
        self._exporter = self._spawn("exporter", exporter_args)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.scrape(path="/healthz")
                break
            except OSError:
                time.sleep(0.2)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the child writes it until it ends
        return subprocess.Popen(
            [sys.executable, "-c", LAUNCH, *args], stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
        )

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def scrape(self, path: str = "/metrics") -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=20) as answer:
            return str(answer.read().decode())

    def close(self) -> None:
        self.client.close()
        for process in (getattr(self, "_exporter", None), self._runtime):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
        if self.isolation == "mps":
            MpsDaemon(self.pipe_dir, self.log_dir).stop()

    def __enter__(self) -> KitNode:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
