"""Container runners: what a simulated kubelet does with a `runtimekit` container instead of
simulating it (`simulate.py` plays every other container's command; the protocol's
`annotations.simulatedRuntime` ends a whole pod after a duration: `parse_duration`).

A container whose command is `runtimekit <subcommand> …` is handed to a `ContainerRunner`, when
the kubelet has one: a callable `(pod, container, node) -> (exit code, message)` run on a thread
of its own. Its exit code and message become the container's `state.terminated`.
`NodeContext` tells a runner about the node (its runtime socket above all, so a controller Job's
`runtimekit job-agent --socket /run/lj-runtimekit/runtime.sock` reaches this node's runtime).
`map_paths` rewrites a `runtimekit` command line's node paths (the runtime socket, the job-agent's
termination log) to the node's real ones; `capture_output` lets a runner collect what the code it
runs prints, per thread.
"""

from __future__ import annotations

import io
import posixpath
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from runtimekit.kube.objects import Container, Pod

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """Seconds from a Go duration (`1m30s`, `500ms`) or a plain number of seconds. ValueError names the text."""
    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        parts = _DURATION_PART.findall(raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise ValueError(f"{text!r} is not a duration such as 30s, 1m30s or 500ms") from None
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{text!r} is not a duration such as 30s, 1m30s or 500ms")
    return seconds


@dataclass(frozen=True)
class NodeContext:
    """What a container runner may know about the node it runs on."""

    node: str
    runtime_socket: str | None  # the node runtime's real socket (None in direct mode)
    protocol_socket: str  # the socket path pods name (the protocol's sockets.runtime)
    work_dir: Path  # a folder the runner may write to (termination logs)
    api_server: str = ""


class ContainerRunner(Protocol):
    def __call__(self, pod: Pod, container: Container, node: NodeContext) -> tuple[int, str]:
        """Run the container to completion; (exit code, termination message). Exceptions count as exit 1
        with the exception as the message. Called on a thread of its own; may block."""
        ...


def command_line(container: Container) -> list[str]:
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


SOCKET_FLAGS = ("--socket", "--runtime-socket")
SOCKET_COMMANDS = frozenset({"job-agent", "runtime-admin"})


def _without_flag(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        elif not any(arg.startswith(f"{f}=") for f in flags):
            out.append(arg)
    return out


def map_paths(argv: list[str], node: NodeContext, termination_log: Path) -> list[str]:
    """Node paths in a `runtimekit` command line → this node's real ones: the runtime socket (given or
    implied by the protocol default) and the job-agent's termination log."""
    command, rest = argv[0], argv[1:]
    extra: list[str] = []
    if node.runtime_socket and (command in SOCKET_COMMANDS or any(a.split("=")[0] in SOCKET_FLAGS for a in rest)):
        rest = _without_flag(rest, SOCKET_FLAGS)
        extra += ["--socket", node.runtime_socket]
    if command == "job-agent":
        rest = _without_flag(rest, ("--termination-log",))
        extra += ["--termination-log", str(termination_log)]
    return [command, *extra, *rest]


def runtimekit_argv(container: Container) -> list[str] | None:
    """The arguments after `runtimekit` when the container runs a runtimekit subcommand, else None."""
    argv = command_line(container)
    if len(argv) >= 2 and posixpath.basename(argv[0]) == "runtimekit":
        return argv[1:]
    return None


class _Router(io.TextIOBase):
    """A stand-in for sys.stdout/sys.stderr that sends a thread's writes to its buffer when it has one."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback
        self.local = threading.local()

    def write(self, text: str) -> int:
        buffer: io.StringIO | None = getattr(self.local, "buffer", None)
        if buffer is not None:
            return buffer.write(text)
        return self.fallback.write(text)

    def flush(self) -> None:
        self.fallback.flush()


_LOCK = threading.Lock()
_USERS = [0]


def _install() -> tuple[_Router, _Router]:
    with _LOCK:
        out = sys.stdout if isinstance(sys.stdout, _Router) else _Router(sys.stdout)
        err = sys.stderr if isinstance(sys.stderr, _Router) else _Router(sys.stderr)
        sys.stdout, sys.stderr = out, err
        _USERS[0] += 1
        return out, err


def _uninstall() -> None:
    with _LOCK:
        _USERS[0] -= 1
        if _USERS[0] == 0:
            if isinstance(sys.stdout, _Router):
                sys.stdout = sys.stdout.fallback
            if isinstance(sys.stderr, _Router):
                sys.stderr = sys.stderr.fallback


@contextmanager
def capture_output() -> Iterator[io.StringIO]:
    """Collect what this thread prints (stdout and stderr) while the block runs; other threads print as usual."""
    buffer = io.StringIO()
    routers = _install()
    for router in routers:
        router.local.buffer = buffer
    try:
        yield buffer
    finally:
        for router in routers:
            router.local.buffer = None
        _uninstall()


def run_safely(runner: ContainerRunner, pod: Pod, container: Container, node: NodeContext) -> tuple[int, str]:
    """Call the runner; an exception is exit code 1 with the exception as the message."""
    try:
        code, message = runner(pod, container, node)
        return int(code), str(message)
    except Exception as exc:  # a runner's bug must end the container, not the kubelet
        return 1, f"{type(exc).__name__}: {exc}"
