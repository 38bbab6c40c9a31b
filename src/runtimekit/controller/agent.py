"""The job-agent: what a controller Job runs on its node. It asks the node's runtime (ConfigService)
to enable or disable itself, waits until the runtime reports the state settled, and exits 0; on any
failure it prints one readable line, writes it to the termination log (so `kubectl describe` and the
controller's Event show it) and exits non-zero."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runtimekit.api.runtime_client import FeatureUnavailable, RuntimeCallError, RuntimeClient

TERMINATION_LOG = "/dev/termination-log"
MPS_FAILED = 5  # MpsDaemonState.MPS_DAEMON_STATE_FAILED


class AgentError(Exception):
    """Why the switch did not happen, in words for an operator."""


@dataclass(frozen=True)
class AgentResult:
    action: str
    enabled: bool
    message: str


def switch(
    socket: str,
    action: str,
    timeout: float = 60.0,
    reason: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> AgentResult:
    if action not in ("enable", "disable"):
        raise AgentError(f"unknown action {action!r}; use enable or disable")
    want = action == "enable"
    deadline = clock() + timeout
    try:
        with RuntimeClient(socket, timeout_s=min(10.0, timeout)) as client:
            if not client.wait_ready(max(0.1, deadline - clock())):
                raise AgentError(f"the runtime at {socket} did not answer within {timeout:g} s")
            status = client.enable(reason or "job-agent") if want else client.disable(reason or "job-agent")
            while status.enabled != want:
                if clock() >= deadline:
                    raise AgentError(f"the runtime did not become {action}d within {timeout:g} s")
                sleep(0.2)
                status = client.status()
            if want and status.mps_daemon == MPS_FAILED:
                raise AgentError(f"the runtime is enabled but its MPS control daemon failed: {status.mps_message}")
            return AgentResult(action, status.enabled, f"runtime on {status.node_name or 'this node'} {action}d")
    except RuntimeCallError as exc:
        raise AgentError(f"the runtime refused to {action}: {exc.details or exc.code.name}") from exc
    except FeatureUnavailable as exc:
        raise AgentError(str(exc)) from exc


def write_termination_message(message: str, path: str = TERMINATION_LOG) -> None:
    target = Path(path)
    if target.parent.is_dir():
        with contextlib.suppress(OSError):
            target.write_text(message[:4096], encoding="utf-8")
