"""End to end: `runtimekit up`'s components run under their own ServiceAccounts with the RBAC of
deploy/, which the API server enforces, so a grant the manifests lack fails here. Each component's
kubeconfig (`<state>/credentials/`) names its user (`kubectl auth whoami` against the cluster); GPU pods
and a Deployment run, and no request of the kit's components was refused."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.apiserver import KUBECTL_DISPATCHER
from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
PODS = "/api/v1/namespaces/default/pods"
SA = "system:serviceaccount:kube-system:"
USERS = {
    f"{SA}lj-runtimekit-scheduler",
    f"{SA}lj-runtimekit-controller",
    f"{SA}lj-runtimekit-webhook",
    f"{SA}lj-runtimekit-runtime",
    f"{SA}lj-runtimekit-device-plugin",
    f"{SA}job-controller",
    "system:kube-controller-manager",
    "system:node:gpu-node-1",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with start_cluster(ClusterOptions(nodes=1, gpus_per_node=2, webhook=True), ready_timeout_s=90) as started:
        yield started


def whoami(kubeconfig: Path) -> str:
    assert KUBECTL_DISPATCHER is not None
    done = subprocess.run(
        [
            KUBECTL_DISPATCHER,
            "--kubeconfig",
            str(kubeconfig),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_each_component_has_its_own_service_account(cluster: EmbeddedCluster) -> None:
    users = set()
    for path in sorted((cluster.state_dir / "credentials").glob("*.kubeconfig")):
        http = KubeHttp.connect(kubeconfig=str(path))
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            answer = http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        finally:
            http.close()
        users.add(answer["status"]["userInfo"]["username"])
    assert users >= USERS
    if KUBECTL_DISPATCHER is not None:  # kubectl sends no token to a plain-http server: the admin's
        assert whoami(cluster.kubeconfig) == "kubernetes-admin"


def gpu_pod(name: str) -> dict[str, object]:
    limits = {P.resources.core: "30", P.resources.memory: "20"}
    container = {"name": "main", "image": "cuda:12", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"schedulerName": P.scheduler_name, "containers": [container]},
    }


def test_the_components_work_with_the_grants_of_deploy(cluster: EmbeddedCluster) -> None:
    http = cluster.http("e2e")
    try:
        http.post(PODS, gpu_pod("share"))
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": gpu_pod("x")["spec"]},
            },
        }
        http.post("/apis/apps/v1/namespaces/default/deployments", deployment)
        running = lambda: [p for p in http.list(PODS)[0] if p.get("status", {}).get("phase") == "Running"]  # noqa: E731
        wait_for(lambda: len(running()) == 3, what="three GPU pods running")
        http.delete(f"{PODS}/share", {"gracePeriodSeconds": 0})
        wait_for(lambda: len(http.list(PODS)[0]) == 2, what="the pod gone")
    finally:
        http.close()
    refused = [message for message in cluster.api.access.denied if "system:anonymous" not in message]
    assert refused == []
