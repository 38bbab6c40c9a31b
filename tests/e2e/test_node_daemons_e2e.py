"""End to end on the embedded cluster with real processes: `runtimekit runtime` and `runtimekit device-plugin`
run as daemons against the embedded API server; the simulated kubelet admits a pod through them."""

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

import httpx2
import pytest

from fixtures.apiserver import make_node
from fixtures.scheduling import binding
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.base.keyring import KeyRing, ensure_key_folder
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.kubelet.devicemanager import DeviceManager
from runtimekit.cluster.kubelet.podresources import serve_pod_resources
from runtimekit.model import Assignment, GpuShare, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

NODE = "gpu-node-1"
PROTOCOL = KitProtocol.default()
RES = PROTOCOL.resources


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="e2e-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def daemon(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "runtimekit.cli.main", *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        return -9


def test_a_pod_is_admitted_through_the_daemons(apiserver: ApiServer, kube_http: httpx2.Client, short_dir: Path) -> None:
    assert kube_http.post("/api/v1/nodes", json=make_node(NODE)).status_code == 201
    plugins = short_dir / "plugins"
    kubelet = DeviceManager(plugins).start()
    pod_resources = serve_pod_resources(kubelet, short_dir / "pr.sock")
    keys = ensure_key_folder(short_dir / "keys")  # the Secret the scheduler and the plugin share
    runtime_socket = short_dir / "rt.sock"
    runtime = daemon(
        "runtime",
        "--backend", "simulated",
        "--simulate-gpus", "2xA100-80GB",
        "--isolation", "mps",
        "--socket", str(runtime_socket),
        "--state-dir", str(short_dir / "state"),
        "--node-name", NODE,
        "--kubeconfig", apiserver.url,
        "--pod-resources-socket", "",
        log=short_dir / "runtime.log",
    )  # fmt: skip
    plugin = daemon(
        "device-plugin",
        "--runtime-socket", str(runtime_socket),
        "--plugin-dir", str(plugins),
        "--node-name", NODE,
        "--kubeconfig", apiserver.url,
        "--startup-timeout", "30",
        "--pod-resources-socket", str(short_dir / "pr.sock"),
        "--assignment-keys", str(keys),
        log=short_dir / "plugin.log",
    )  # fmt: skip
    try:
        full = {RES.gpu: 2, RES.core: 200, RES.memory: 160}
        assert kubelet.wait_for(lambda k: k.capacity() == full, timeout_s=30), (short_dir / "plugin.log").read_text()
        gpu1 = simulated_uuid(NODE, 1)
        assignment = Assignment(NodeName(NODE), {"main": (GpuShare(gpu1, 1, 500, 20480),)})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "main", "image": "cuda:12", "resources": {"limits": {RES.core: "50", RES.memory: "20"}}}
                ],
            },
        }
        created = kube_http.post("/api/v1/namespaces/default/pods", json=pod).json()
        path, body = binding(created, NODE, assignment, KeyRing.from_folder(keys))
        assert kube_http.post(path, json=body).status_code == 201
        bound = kube_http.get("/api/v1/namespaces/default/pods/trainer").json()
        options = kubelet.admit_pod(bound)["main"]
        assert options.envs["NVIDIA_VISIBLE_DEVICES"] == gpu1
        assert options.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert options.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
        annotations = kube_http.get("/api/v1/namespaces/default/pods/trainer").json()["metadata"]["annotations"]
        assert json.loads(annotations[PROTOCOL.annotations.allocated])["containers"] == {"main": [RES.core, RES.memory]}
        node = kube_http.get(f"/api/v1/nodes/{NODE}").json()["metadata"]
        assert node["labels"][PROTOCOL.labels.gpu_model] == "A100-80GB"
        with RuntimeClient(str(runtime_socket)) as client:
            assert [(a.pod.name, a.shares[0].uuid) for a in client.list_allocations()] == [("trainer", gpu1)]
    finally:
        codes = (stop(plugin), stop(runtime))
        pod_resources.stop(0).wait()
        kubelet.stop()
    assert codes == (0, 0)
