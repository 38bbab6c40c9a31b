"""`runtimekit inspect` against an API server, as the kubectl plugin `kubectl lj inspect` found by the
real kubectl on PATH: the pods on each GPU from their signed assignments, and the usage the node's
exporter serves (a simulated runtime's, scraped over HTTP)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from fixtures.apiserver import Kubectl, make_node
from fixtures.kubectl_lj import plugin_env
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.api.runtimekit.v1 import runtime_pb2 as pb
from runtimekit.base.keyring import KeyRing
from runtimekit.cli.inspect_usage import read_usage
from runtimekit.cli.main import main as runtimekit_main
from runtimekit.cli.node_exporter import start_node_exporter
from runtimekit.exporter.config import ExporterConfig, HealthConfig
from runtimekit.model import Assignment, GpuShare, NodeInventory
from runtimekit.model.authority import sign_assignment
from runtimekit.model.gpu import Gpu, GpuUUID, NodeName
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.daemon import RuntimeDaemon, RuntimeOptions, build_runtime

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = KitProtocol.default()
SECRET = b"s" * 32


@dataclass(frozen=True)
class Node:
    name: str
    runtime_socket: str | None


@dataclass(frozen=True)
class Served:
    url: str
    gpus: tuple[Gpu, ...]


@pytest.fixture
def exporter() -> Iterator[Served]:
    """A simulated runtime of node n1 (2 T4s) with one allocation, and its exporter."""
    folder = Path(tempfile.mkdtemp(prefix="rki-"))
    options = RuntimeOptions("simulated", str(folder / "rt.sock"), folder / "state", "n1", simulate_gpus="2xT4")
    daemon = RuntimeDaemon(build_runtime(options), options.socket_path, 0).start()
    with RuntimeClient(options.socket_path) as client:
        devices = client.list_devices()
        share = pb.GpuShare(uuid=devices[0].uuid, core_milli=300, memory_mib=2048)
        client.allocate("default", "a", "uid-a", "main", [share])
    gpus = tuple(Gpu(d.index, GpuUUID(d.uuid), d.model, d.memory_mib) for d in devices)
    started = start_node_exporter(
        Node("n1", options.socket_path), config=ExporterConfig(health=HealthConfig(enabled=False))
    )
    assert started is not None
    try:
        yield Served(started.url, gpus)
    finally:
        started.stop()
        daemon.stop()
        shutil.rmtree(folder, ignore_errors=True)


def create_cluster(kube_http: httpx2.Client, gpus: tuple[Gpu, ...]) -> None:
    inventory = NodeInventory(NodeName("n1"), gpus)
    node = make_node("n1", annotations={PROTOCOL.annotations.node_devices: inventory.to_annotation()})
    assert kube_http.post("/api/v1/nodes", json=node).status_code == 201
    text = Assignment(NodeName("n1"), {"main": (GpuShare(gpus[0].uuid, 0, 300, 2048),)}).to_annotation()
    for name, signed in (("a", True), ("forged", False)):
        limits = {PROTOCOL.resources.core: "30", PROTOCOL.resources.memory: "2"}
        body = {
            "metadata": {"name": name, "annotations": {PROTOCOL.annotations.assignment: text}},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
        }
        made = kube_http.post("/api/v1/namespaces/default/pods", json=body)
        assert made.status_code == 201, made.text
        if signed:
            signature = sign_assignment(KeyRing.from_secrets(SECRET), made.json()["metadata"]["uid"], text)
            patch = {"metadata": {"annotations": {PROTOCOL.annotations.assignment_signature: signature}}}
            answer = kube_http.patch(
                "/api/v1/namespaces/default/pods/a",
                content=json.dumps(patch),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert answer.status_code == 200, answer.text


@pytest.mark.slow  # two kubectl runs, one starting the kit's Python: about 6 s on a busy machine
def test_kubectl_lj_inspect_shows_verified_pods_and_the_exporters_usage(
    kubectl: Kubectl, kube_http: httpx2.Client, exporter: Served, tmp_path: Path
) -> None:
    create_cluster(kube_http, exporter.gpus)
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "current").write_bytes(SECRET)
    env = plugin_env(tmp_path / "bin", kubectl.env())
    listed = subprocess.run(
        [kubectl.default_binary, "plugin", "list"], check=False, env=env, capture_output=True, text=True
    )
    assert "kubectl-lj" in listed.stdout, listed.stderr
    command = [kubectl.default_binary, "lj", "inspect", "-o", "json", "--assignment-keys", str(keys)]
    answer = subprocess.run(
        [*command, "--exporter", f"n1={exporter.url}"], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
    (node,) = json.loads(answer.stdout)["nodes"]
    g0, g1 = node["gpus"]
    assert [(p["pod"], p["coreMilli"], p["memoryMiB"]) for p in g0["pods"]] == [("a", 300, 2048)]
    assert (g0["coreFreeMilli"], g1["pods"]) == (700, [])
    assert [(i["pod"], i["reason"]) for i in node["ignored"]] == [("forged", "unsigned")]
    assert node["exporter"]["error"] == ""
    assert all(0 <= g["usage"]["utilization"] <= 1 and g["usage"]["healthy"] is True for g in (g0, g1))


def test_read_usage_takes_each_gpus_readings_from_the_exporters_text(exporter: Served) -> None:
    text = httpx2.get(exporter.url, timeout=10).text
    usage = read_usage(exporter.url, text)
    assert usage.runtime_up is True
    assert set(usage.gpus) == {g.uuid for g in exporter.gpus}
    line = next(x for x in text.splitlines() if x.startswith("runtimekit_gpu_memory_used_bytes{") and 'gpu="1"' in x)
    assert usage.gpus[exporter.gpus[1].uuid].memory_used_bytes == float(line.rsplit(" ", 1)[1])


def test_the_table_has_a_row_per_gpu_and_totals(
    kubeconfig: Path, kube_http: httpx2.Client, exporter: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    create_cluster(kube_http, exporter.gpus)
    assert runtimekit_main(["inspect", "--kubeconfig", str(kubeconfig), "--exporter", f"n1={exporter.url}"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    assert rows[1][:4] == ["GPU", "MODEL", "HEALTH", "CORE"]
    assert rows[2][:5] == ["0", "T4", "ok", "60%", "4/15"]  # no keys given: the unsigned pod counts too
    assert "Allocated/Total GPU compute in cluster:" in out


def test_an_unreachable_exporter_leaves_the_granted_shares(
    kubeconfig: Path, kube_http: httpx2.Client, exporter: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    create_cluster(kube_http, exporter.gpus)
    args = ["inspect", "--kubeconfig", str(kubeconfig), "-o", "json", "--exporter", "n1=http://127.0.0.1:9/metrics"]
    assert runtimekit_main(args) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert "cannot scrape http://127.0.0.1:9/metrics" in node["exporter"]["error"]
    assert node["gpus"][0]["coreGrantedMilli"] == 600
    assert "usage" not in node["gpus"][0]


def test_each_containers_usage_is_shown_where_the_exporter_attributes_it(
    kubeconfig: Path, kube_http: httpx2.Client, exporter: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulated runtime's usage model: a container uses 60 % of its compute share and 70 % of
    its memory (runtime/simusage.py); "forged" has no allocation in the runtime, so no reading."""
    create_cluster(kube_http, exporter.gpus)
    args = ["inspect", "--kubeconfig", str(kubeconfig), "-o", "json", "--exporter", f"n1={exporter.url}"]
    assert runtimekit_main(args) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    shares = {p["pod"]: p.get("usage") for p in node["gpus"][0]["pods"]}
    assert shares["forged"] is None
    assert shares["a"]["memoryUsedBytes"] == pytest.approx(0.7 * 2048 * 2**20, rel=0.01)
    assert shares["a"]["utilization"] == pytest.approx(0.6 * 0.3, abs=0.01)
    assert shares["a"]["overShare"] is False
    assert runtimekit_main([*args[:3], "-o", "wide", *args[5:]]) == 0
    (row,) = [line.split() for line in capsys.readouterr().out.splitlines() if "default/a (main)" in line]
    assert row[-4:] == ["18%", "1.4", "default/a", "(main)"]
