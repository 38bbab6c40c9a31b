"""The embedded cluster the end-to-end scheduling benches run against, each part in a process of its own.

`apiserver()` starts the embedded API server in a child process and yields its URL and pid;
`scheduler()` starts `runtimekit scheduler` against it (a kubeconfig, signed assignments, an optional
conf and extra flags) and yields the process; both stop their process with SIGTERM on the way out.
`cpu_seconds()` and `rss_bytes()` read what a child has used so far from /proc, `own_cpu_seconds()`
what this process has. Callers: `bench_scheduler_e2e.py` and `scheduler_perf.py` (and its test).
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from runtimekit.base.keyring import ensure_key_folder

SERVER = """
import signal, sys, threading
from runtimekit.cluster.apiserver import ApiServer
server = ApiServer(port=int(sys.argv[1]), bookmark_interval=5.0).start()
print("ready", flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
server.stop()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


@contextmanager
def apiserver() -> Iterator[tuple[str, int]]:
    """The embedded API server in a child process: (its URL, its pid)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}", server.pid
    finally:
        stop(server)


def stop(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL after 30 s: a scheduler deep in a long session must not hide the figure."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)


def write_kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: e, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: e, user: {}}]\ncontexts: [{name: e, context: {cluster: e, user: e}}]\n"
        "current-context: e\n"
    )
    return path


@contextmanager
def scheduler(url: str, conf: str | None = None, args: Sequence[str] = ()) -> Iterator[subprocess.Popen[bytes]]:
    """`runtimekit scheduler` against `url` in a child process; `conf` is a Volcano-format conf (None: the default)."""
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", url)
        command = [sys.executable, "-m", "runtimekit.cli.main", "--log-level", "WARNING", "scheduler"]
        command += ["--kubeconfig", str(kubeconfig)]
        if conf is not None:
            (Path(tmp) / "scheduler.conf").write_text(conf)
            command += ["--config", str(Path(tmp) / "scheduler.conf")]
        command += ["--assignment-keys", str(ensure_key_folder(Path(tmp) / "assignment-key")), *args]
        process = subprocess.Popen(command, env=_env())
        try:
            yield process
        finally:
            stop(process)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a live process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """A live process's resident set size now (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
