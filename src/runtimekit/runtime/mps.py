"""Start and stop the MPS control daemon where `nvidia-cuda-mps-control` exists (protocols.md §5.1).

Start: `nvidia-cuda-mps-control -d` with `CUDA_MPS_PIPE_DIRECTORY`/`CUDA_MPS_LOG_DIRECTORY` set to
our folders. Stop: write `quit` to the control binary's stdin. Without the binary both report
BINARY_MISSING and change nothing (a CPU-only or simulated node). Compute modes are never touched.
The command runner and the binary lookup are injectable for tests. Callers: the runtime's
ConfigService (Enable/Disable) and its start-up.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

log = logging.getLogger(__name__)

BINARY = "nvidia-cuda-mps-control"


class MpsState(StrEnum):
    NOT_USED = "not-used"
    RUNNING = "running"
    STOPPED = "stopped"
    BINARY_MISSING = "binary-missing"
    FAILED = "failed"


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str


Runner = Callable[[list[str], str | None, Mapping[str, str]], CommandResult]


def run_command(argv: list[str], stdin: str | None, env: Mapping[str, str]) -> CommandResult:
    """Run a command with a 30 s limit; its combined output comes back."""
    try:
        done = subprocess.run(argv, input=stdin, env=dict(env), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CommandResult(-1, str(exc))
    return CommandResult(done.returncode, (done.stdout + done.stderr).strip())


class MpsDaemon:
    """One MPS control daemon with its own pipe and log folders."""

    def __init__(
        self,
        pipe_dir: str,
        log_dir: str,
        runner: Runner = run_command,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.pipe_dir = pipe_dir
        self.log_dir = log_dir
        self._runner = runner
        self._which = which
        self.state = MpsState.STOPPED
        self.message = ""

    def _env(self) -> dict[str, str]:
        return {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir}

    def start(self) -> MpsState:
        binary = self._which(BINARY)
        if binary is None:
            return self._set(MpsState.BINARY_MISSING, f"{BINARY} not found; MPS limits apply only where MPS runs")
        for folder in (self.pipe_dir, self.log_dir):
            Path(folder).mkdir(parents=True, exist_ok=True)
        result = self._runner([binary, "-d"], None, self._env())
        if result.returncode != 0:
            return self._set(MpsState.FAILED, f"{BINARY} -d exited {result.returncode}: {result.output}")
        return self._set(MpsState.RUNNING, f"started with pipe folder {self.pipe_dir}")

    def stop(self) -> MpsState:
        binary = self._which(BINARY)
        if binary is None:
            return self._set(MpsState.BINARY_MISSING, f"{BINARY} not found")
        result = self._runner([binary], "quit\n", self._env())
        if result.returncode != 0:
            return self._set(MpsState.FAILED, f"'echo quit | {BINARY}' exited {result.returncode}: {result.output}")
        return self._set(MpsState.STOPPED, "stopped")

    def _set(self, state: MpsState, message: str) -> MpsState:
        log.info("MPS control daemon: %s (%s)", state, message)
        self.state, self.message = state, message
        return state
