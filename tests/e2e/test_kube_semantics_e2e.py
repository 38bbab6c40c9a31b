"""End to end with the real kubectl on the embedded cluster (2 nodes of A100-80GB in dynamic MIG mode):
the scheduler keeps the constraints a Kubernetes pod states as kube-scheduler does.

- A pod asking for a resource no node offers stays Pending with kube-scheduler's
  `Insufficient <resource>` and is never bound (so kubelet never rejects it).
- Pods asking only for a MIG slice (no CPU, no memory, as HAMi's MIG example) are placed at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER, Kubectl
from fixtures.waiting import wait_for
from runtimekit.cli.embedded import ClusterOptions, EmbeddedCluster, start_cluster
from runtimekit.protocol import Protocol

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES, reason="kubectl is not installed"),
]
P = Protocol.default()


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    options = ClusterOptions(nodes=2, gpus_per_node=2, gpu_model="A100-80GB", mig_mode="dynamic", controller=False)
    with start_cluster(options, ready_timeout_s=90) as started:
        yield started


@pytest.fixture
def kubectl(cluster: EmbeddedCluster, tmp_path: Path) -> Iterator[Kubectl]:
    home = tmp_path / "home"
    home.mkdir()
    run = Kubectl(cluster.kubeconfig, home, KUBECTL_DISPATCHER or str(next(iter(KUBECTL_BINARIES.values()))))
    yield run
    run("delete", "pods", "--all", "--grace-period=0", "--wait=false")
    wait_for(lambda: not pods(run), what="pods gone", interval=0.3)


def pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(kubectl("get", "pods", "-o", "json").stdout)["items"]
    return items


def manifest(name: str, limits: dict[str, Any], requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": P.scheduler_name,
            "containers": [{"name": "main", "image": "cuda:12", "resources": resources}],
        },
    }


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def events_of(kubectl: Kubectl, name: str) -> list[str]:
    listed = json.loads(
        kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json").stdout
    )
    return [f"{e['reason']}: {e['message']}" for e in listed["items"]]


@pytest.mark.parametrize(
    ("resource", "amount"),
    [
        pytest.param("nvidia.com/gpu", 1, id="another vendor's whole GPU"),
        pytest.param("volcano.sh/gpu-memory", 1024, id="another system's GPU memory"),
        pytest.param("example.com/foo", 1, id="any extended resource"),
        pytest.param(f"{P.resources.mig_prefix}9g.99gb", 1, id="a MIG profile no GPU has"),
    ],
)
def test_a_resource_no_node_offers_leaves_the_pod_pending_with_the_reason(
    kubectl: Kubectl, resource: str, amount: int
) -> None:
    apply(kubectl, manifest("wants", {resource: amount}, {"cpu": "100m"}))
    wait_for(
        lambda: any("FailedScheduling" in e for e in events_of(kubectl, "wants")),
        what="a FailedScheduling event",
        interval=0.3,
    )
    events = events_of(kubectl, "wants")
    (pod,) = pods(kubectl)
    assert not pod["spec"].get("nodeName"), "bound to a node that cannot run it"
    assert pod["status"]["phase"] == "Pending"
    if resource.startswith(P.resources.mig_prefix):
        assert any("0/2 nodes are available: 2 no free MIG slot for 9g.99gb." in e for e in events), events
    else:
        assert any(f"0/2 nodes are available: 2 Insufficient {resource}." in e for e in events), events


def test_pods_asking_only_for_a_mig_slice_are_placed_at_once(kubectl: Kubectl) -> None:
    limits = {f"{P.resources.mig_prefix}1g.10gb": 1}
    apply(kubectl, *(manifest(f"slice-{i}", limits) for i in range(14)))
    wait_for(
        lambda: all(p["status"].get("phase") == "Running" for p in pods(kubectl)), what="14 pods running", interval=0.3
    )
    placed = [p for p in pods(kubectl) if p["spec"].get("nodeName")]
    assert len(placed) == 14


def test_volcano_queues_default_and_root_exist_and_report_their_status(kubectl: Kubectl) -> None:
    """Volcano's example queue (`test`, 2 CPUs) next to pods that name no queue; then `test` closed."""
    wait_for(lambda: kubectl("get", "queue", "default", "root", check=False).returncode == 0, what="queues")
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "test"},
        "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": 2}},
    }
    apply(kubectl, queue, manifest("plain", {f"{P.resources.mig_prefix}1g.10gb": 1}, {"cpu": "500m"}))
    wait_for(lambda: pods(kubectl)[0]["status"].get("phase") == "Running", what="the plain pod running", interval=0.3)

    def running_in_default() -> bool:
        status = json.loads(kubectl("get", "queue", "default", "-o", "json").stdout).get("status") or {}
        return status.get("running") == 1 and status.get("allocated", {}).get("cpu") == "500m"

    wait_for(running_in_default, what="default queue status", interval=0.3)
    kubectl("patch", "queue", "test", "--subresource=status", "--type=merge", "-p", '{"status":{"state":"Closed"}}')
    late = manifest("late", {f"{P.resources.mig_prefix}1g.10gb": 1})
    late["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "test"}
    apply(kubectl, late)
    wait_for(lambda: any("queue test is Closed" in e for e in events_of(kubectl, "late")), what="refused", interval=0.3)
    assert not json.loads(kubectl("get", "pod", "late", "-o", "json").stdout)["spec"].get("nodeName")
    kubectl("delete", "queue", "test")
