"""Fixtures for the exporter: a runtime on simulated GPUs, an exporter serving it, and a real
Prometheus (Debian's package unpacked into .tools/ by scripts/fetch_tools.sh) scraping it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client import CollectorRegistry

from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.exporter.collector import RuntimeCollector
from runtimekit.exporter.config import HealthConfig
from runtimekit.exporter.health import HealthCollector, HealthDetector
from runtimekit.exporter.server import MetricsServer
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon
from runtimekit.runtime.isolation import make_isolation
from runtimekit.runtime.service import NodeRuntime
from runtimekit.runtime.simulated import SimulatedBackend, parse_gpu_spec
from runtimekit.runtime.values import RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools" / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tool(name: str) -> Path:
    path = TOOLS / name
    if not path.exists():
        if os.environ.get("RUNTIMEKIT_REQUIRE_TOOLS"):
            pytest.fail(f"{path} is missing: run scripts/fetch_tools.sh")
        pytest.skip(f"{name} not fetched (scripts/fetch_tools.sh)")
    return path


@dataclass
class Node:
    socket: str
    daemon: RuntimeDaemon
    client: RuntimeClient


@pytest.fixture
def node() -> Iterator[Node]:
    folder = Path(tempfile.mkdtemp(prefix="rke-"))
    backend = SimulatedBackend("node-a", parse_gpu_spec("2xH200"), seed=3)
    service = NodeRuntime(
        RuntimeSettings("node-a", folder / "state", KitProtocol.default(), "0.1.0", 30.0),
        backend,
        make_isolation("none"),
        injector=backend,
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    client = RuntimeClient(sock, timeout_s=2.0)
    yield Node(sock, daemon, client)
    client.close()
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Exporter:
    url: str
    address: str
    detector: HealthDetector
    registry: CollectorRegistry


@pytest.fixture
def exporter(node: Node) -> Iterator[Exporter]:
    registry = CollectorRegistry()
    client = RuntimeClient(node.socket, timeout_s=2.0)
    registry.register(RuntimeCollector(client, KitProtocol.default()))
    detector = HealthDetector(client, HealthConfig(interval_seconds=0.2, recovery_seconds=2.0))
    registry.register(HealthCollector(detector))
    server = MetricsServer(registry, "127.0.0.1", 0).start()
    detector.start()
    yield Exporter(f"http://{server.address}", server.address, detector, registry)
    detector.stop()
    server.stop()
    client.close()


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = httpx2.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait(self, expr: str, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if check(result):
                return result
            time.sleep(0.3)
        raise AssertionError(f"{expr}: still {result}")


@pytest.fixture
def prometheus(exporter: Exporter, tmp_path: Path) -> Iterator[Prometheus]:
    binary = tool("prometheus")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"- job_name: runtimekit\n  static_configs: [{{targets: ['{exporter.address}']}}]\n"
    )
    process = subprocess.Popen(
        [
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                targets = httpx2.get(f"{url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
                if targets and all(t["health"] == "up" for t in targets):
                    break
            except (httpx2.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.3)
        else:
            raise AssertionError("Prometheus never scraped the exporter")
        yield Prometheus(url)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def usage_node() -> Iterator[Node]:
    """A runtime on 2 simulated H200s that reads each container's usage (the simulated usage model's
    defaults: `runtimekit.runtime.simusage`), as `runtimekit up` runs it."""
    from runtimekit.runtime.simusage import SimulatedUsage, usage_annotations

    folder = Path(tempfile.mkdtemp(prefix="rke-"))
    backend = SimulatedBackend("node-a", parse_gpu_spec("2xH200"), seed=3)
    protocol = KitProtocol.default()
    service = NodeRuntime(
        RuntimeSettings("node-a", folder / "state", protocol, "0.1.0", 30.0),
        backend,
        make_isolation("none"),
        injector=backend,
        usage=SimulatedUsage(usage_annotations(protocol.annotations.simulated_runtime)),
    )
    sock = str(folder / "runtime.sock")
    daemon = RuntimeDaemon(service, sock, reconcile_interval_s=0).start()
    client = RuntimeClient(sock, timeout_s=2.0)
    yield Node(sock, daemon, client)
    client.close()
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)
