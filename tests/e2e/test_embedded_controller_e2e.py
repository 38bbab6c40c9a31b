"""End to end: the node controller switches a simulated node's runtime through a Job. The embedded Job
controller makes the Job's pod, the node's simulated kubelet runs its `runtimekit job-agent` in
process against the node's real runtime socket, and the runtime really switches: a disabled runtime
refuses new GPU pods (kubelet's admission error), an enabled one serves them again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.scheduling import bind
from fixtures.waiting import wait_for
from runtimekit.api.runtime_client import RuntimeClient
from runtimekit.base.keyring import KeyRing
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.kube.http import KubeHttp
from runtimekit.model import Assignment, GpuShare, NodeName, simulated_uuid
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
NODE = "gpu-node-1"
JOBS = "/apis/batch/v1/namespaces/lj-runtimekit-jobs/jobs"


def label(http: KubeHttp, value: str) -> None:
    http.patch(f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {P.labels.enable: value}}})


def state(http: KubeHttp) -> str | None:
    return http.get(f"/api/v1/nodes/{NODE}")["metadata"]["labels"].get(P.labels.state)


def submit(cluster: EmbeddedCluster, http: KubeHttp, name: str) -> None:
    """Create a pod and bind it as the scheduler would, with a quarter of GPU 0."""
    share = GpuShare(simulated_uuid(NODE, 0), 0, 250, 10240)
    created = http.post("/api/v1/namespaces/default/pods", gpu_pod(name))
    keys = KeyRing.from_folder(cluster.assignment_keys)
    bind(http.post, created, NODE, Assignment(NodeName(NODE), {"main": (share,)}), keys)


def gpu_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "cuda",
                    "resources": {"limits": {P.resources.core: "25", P.resources.memory: "10"}},
                }
            ],
        },
    }


def outcome(http: KubeHttp, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        pod = http.get(f"/api/v1/namespaces/default/pods/{name}")
        return pod if pod.get("status", {}).get("phase") in ("Running", "Failed") else None

    return dict(wait_for(check, what=f"pod {name} admitted or rejected"))


def switch_and_check(cluster: EmbeddedCluster, http: KubeHttp, value: str, wanted: str) -> None:
    label(http, value)
    wait_for(lambda: state(http) == wanted, what=f"node state {wanted}")
    socket = cluster.node(NODE).runtime_socket
    assert socket is not None
    with RuntimeClient(socket) as runtime:
        assert runtime.status().enabled is (wanted == "enabled")
    action = "enable" if value == "true" else "disable"
    jobs = [j for j in http.list(JOBS)[0] if f"-{action}-" in j["metadata"]["name"]]
    assert [c["type"] for j in jobs for c in j["status"]["conditions"]] == ["Complete"]
    [pod] = http.list(
        "/api/v1/namespaces/lj-runtimekit-jobs/pods", {"labelSelector": f"job-name={jobs[0]['metadata']['name']}"}
    )[0]
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (pod["status"]["phase"], terminated["exitCode"]) == ("Succeeded", 0)
    assert terminated["message"] == f"runtime on {NODE} {wanted}"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=1, gpus_per_node=2, scheduler=False, controller=request.param)
    with start_cluster(options, ready_timeout_s=60) as started:
        yield started


@pytest.mark.parametrize("cluster", [False], indirect=True, ids=["controller-process"])
def test_runtimekit_controller_switches_a_node_runtime_through_a_job(cluster: EmbeddedCluster, tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    controller = subprocess.Popen(
        [
            *(sys.executable, "-m", "runtimekit.cli.main", "controller", "--kubeconfig", str(cluster.kubeconfig)),
            "--namespace=lj-runtimekit-jobs",  # as deploy/controller runs it
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    )
    http = cluster.http("e2e")
    try:
        switch_and_check(cluster, http, "false", "disabled")
        submit(cluster, http, "refused")
        refused = outcome(http, "refused")["status"]
        assert refused["phase"] == "Failed"
        assert refused["reason"] == "UnexpectedAdmissionError"
        assert "Allocate failed due to rpc error: code = FAILED_PRECONDITION" in refused["message"]
        assert "is disabled" in refused["message"]
        switch_and_check(cluster, http, "true", "enabled")
        submit(cluster, http, "served")
        assert outcome(http, "served")["status"]["phase"] == "Running"
    finally:
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(timeout=30)
        http.close()
    assert code == 0, log.read_text()[-3000:]


@pytest.mark.parametrize("cluster", [True], indirect=True, ids=["controller-in-process"])
def test_the_embedded_clusters_own_controller_switches_too(cluster: EmbeddedCluster) -> None:
    http = cluster.http("e2e")
    try:
        switch_and_check(cluster, http, "false", "disabled")
    finally:
        http.close()
    assert not cluster.api.access.denied  # the controller did it all with the grants of deploy/controller
