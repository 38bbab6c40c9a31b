"""End to end with the real kubectl on the embedded cluster (2 nodes of A100-80GB in dynamic MIG mode):
the scheduler keeps the constraints a Kubernetes pod states as kube-scheduler does.

- A pod asking for a resource no node offers stays Pending with kube-scheduler's
  `Insufficient <resource>` and is never bound (so kubelet never rejects it).
- Pods asking only for a MIG slice (no CPU, no memory, as HAMi's MIG example) are placed at once.
- Where pods go by each other (kube-scheduler's InterPodAffinity, PodTopologySpread, NodePorts):
  a training job with one worker per node by anti-affinity; a spread over zones that counts the
  pods already there; host ports; pod affinity to a namespace chosen by its labels.
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
from runtimekit.protocol import KitProtocol

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(KUBECTL_DISPATCHER is None and not KUBECTL_BINARIES, reason="kubectl is not installed"),
]
P = KitProtocol.default()


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


# -- where pods go by each other ---------------------------------------------------------------------

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def node_names(kubectl: Kubectl) -> list[str]:
    listed = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return sorted(n["metadata"]["name"] for n in listed)


def placed(kubectl: Kubectl, namespace: str = "default") -> dict[str, str]:
    listed = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in listed if p["spec"].get("nodeName")}


def small(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A pod asking for a little CPU, with labels and more spec (affinity, spread, ports)."""
    pod = manifest(name, {}, {"cpu": "100m"})
    pod["metadata"]["labels"] = labels
    pod["spec"].update(spec)
    return pod


def one_per_node(label: str, value: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {label: value}}, "topologyKey": HOSTNAME}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }


def member(pod: dict[str, Any], group: str) -> dict[str, Any]:
    pod["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    return pod


def failed_scheduling(kubectl: Kubectl, name: str, namespace: str = "default") -> list[str]:
    listed = json.loads(
        kubectl(
            "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}", "-o", "json"
        ).stdout
    )
    return [e["message"] for e in listed["items"] if e["reason"] == "FailedScheduling"]


def test_a_training_job_with_one_worker_per_node_spreads_over_the_nodes(kubectl: Kubectl) -> None:
    workers = [
        member(small(f"w{i}", {"job": "train"}, affinity=one_per_node("job", "train")), "train") for i in range(2)
    ]
    apply(kubectl, podgroup("train", 2), *workers)
    wait_for(lambda: len(placed(kubectl)) == 2, what="both workers bound", interval=0.3)
    assert sorted(placed(kubectl).values()) == node_names(kubectl)

    # a gang of 3 with one per node on 2 nodes: none is bound, and each says why
    big = [member(small(f"b{i}", {"job": "big"}, affinity=one_per_node("job", "big")), "big") for i in range(3)]
    apply(kubectl, podgroup("big", 3), *big)
    wait_for(lambda: all(failed_scheduling(kubectl, f"b{i}") for i in range(3)), what="3 refusals", interval=0.3)
    assert set(placed(kubectl)) == {"w0", "w1"}
    messages = {m for i in range(3) for m in failed_scheduling(kubectl, f"b{i}")}
    assert any("node(s) didn't match pod anti-affinity rules" in m for m in messages), messages
    kubectl("delete", "podgroup", "train", "big")


def test_a_spread_over_zones_counts_the_pods_already_there(kubectl: Kubectl) -> None:
    first, second = node_names(kubectl)
    kubectl("label", "node", first, f"{ZONE}=zone-a")
    kubectl("label", "node", second, f"{ZONE}=zone-b")
    try:
        # two web pods pinned to zone-a, then two that must keep the skew at most 1: both to zone-b
        pinned = [small(f"pinned-{i}", {"app": "web"}, nodeSelector={ZONE: "zone-a"}) for i in range(2)]
        apply(kubectl, *pinned)
        wait_for(lambda: len(placed(kubectl)) == 2, what="the pinned pods bound", interval=0.3)
        spread = {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
        apply(kubectl, *(small(f"spread-{i}", {"app": "web"}, topologySpreadConstraints=[spread]) for i in range(2)))
        wait_for(lambda: len(placed(kubectl)) == 4, what="the spread pods bound", interval=0.3)
        where = placed(kubectl)
        assert (where["spread-0"], where["spread-1"]) == (second, second)

        # a pod whose constraint names a key no node has: kube-scheduler's "missing required label"
        odd = {**spread, "topologyKey": "example.com/rack"}
        apply(kubectl, small("odd", {"app": "web"}, topologySpreadConstraints=[odd]))
        wait_for(lambda: bool(failed_scheduling(kubectl, "odd")), what="a refusal", interval=0.3)
        assert failed_scheduling(kubectl, "odd")[0] == (
            "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints (missing required label)."
        )
    finally:
        kubectl("label", "node", first, f"{ZONE}-")
        kubectl("label", "node", second, f"{ZONE}-")


def test_pods_with_the_same_host_port_go_to_different_nodes(kubectl: Kubectl) -> None:
    def serving(name: str) -> dict[str, Any]:
        pod = small(name, {"app": "agent"})
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9000, "hostPort": 9000, "protocol": "TCP"}]
        return pod

    apply(kubectl, serving("agent-0"), serving("agent-1"))
    wait_for(lambda: len(placed(kubectl)) == 2, what="two agents bound", interval=0.3)
    assert sorted(placed(kubectl).values()) == node_names(kubectl)
    apply(kubectl, serving("agent-2"))
    wait_for(lambda: bool(failed_scheduling(kubectl, "agent-2")), what="a refusal", interval=0.3)
    assert failed_scheduling(kubectl, "agent-2")[0] == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    )


def test_pod_affinity_finds_its_peer_in_a_namespace_chosen_by_labels(kubectl: Kubectl) -> None:
    _, second = node_names(kubectl)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    apply(kubectl, namespace)
    try:
        db = small("db", {"app": "db"}, nodeSelector={HOSTNAME: second})
        db["metadata"]["namespace"] = "team-a"
        apply(kubectl, db)
        wait_for(lambda: placed(kubectl, "team-a") == {"db": second}, what="db bound", interval=0.3)

        def next_to_db(name: str, team: str) -> dict[str, Any]:
            term = {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {"team": team}},
                "topologyKey": HOSTNAME,
            }
            return small(
                name,
                {"app": "client"},
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            )

        apply(kubectl, next_to_db("client", "a"), next_to_db("lost", "b"))
        wait_for(lambda: "client" in placed(kubectl), what="the client bound", interval=0.3)
        assert placed(kubectl)["client"] == second
        wait_for(lambda: bool(failed_scheduling(kubectl, "lost")), what="a refusal", interval=0.3)
        assert (
            failed_scheduling(kubectl, "lost")[0]
            == "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
        )
    finally:
        kubectl("delete", "pods", "--all", "-n", "team-a", "--grace-period=0", "--wait=false", check=False)
        kubectl("delete", "namespace", "team-a", "--wait=false", check=False)
