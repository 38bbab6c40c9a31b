"""The real kubectl against the embedded server: the bundled 1.27, 1.30 and 1.33 binaries called
directly (each against a server reporting its own version), and the /usr/bin/kubectl dispatcher,
which picks its binary from the server's /version."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from fixtures.apiserver import KUBECTL_BINARIES, KUBECTL_DISPATCHER, Kubectl, http_client, make_node, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.model import NodeInventory
from runtimekit.protocol import KitProtocol

PROTOCOL = KitProtocol.default()
VERSIONS = [v for v in ("1.27", "1.30", "1.33") if v in KUBECTL_BINARIES]
pytestmark = pytest.mark.skipif(not VERSIONS, reason="the bundled kubectl binaries are not installed")

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web, rev: "LABEL"}
spec:
  containers:
  - name: main
    image: nginx:1.27
    resources:
      requests: {cpu: 500m, memory: 256Mi}
"""


class Cluster:
    def __init__(self, server: ApiServer, kubectl: Kubectl, binary: Path | None) -> None:
        self.server, self.kubectl, self.binary = server, kubectl, binary
        self.http = http_client(server.url)

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl(*args, binary=self.binary, stdin=stdin, check=check)

    def out(self, *args: str, stdin: str | None = None) -> str:
        return self.run(*args, stdin=stdin).stdout

    def post(self, path: str, obj: dict[str, object]) -> None:
        response = self.http.post(path, json=obj)
        assert response.status_code == 201, response.text


@pytest.fixture(params=VERSIONS, ids=[f"kubectl-{v}" for v in VERSIONS])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    version = request.param
    with ApiServer(kubernetes_version=version) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        (tmp_path / "home").mkdir()
        kubectl = Kubectl(kubeconfig, tmp_path / "home", str(KUBECTL_BINARIES[version]))
        cluster = Cluster(server, kubectl, KUBECTL_BINARIES[version])
        yield cluster
        cluster.http.close()


def rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def gpu_node(name: str) -> dict[str, object]:
    inventory = NodeInventory.simulated(name, "H200", 4)
    return make_node(name, annotations={PROTOCOL.annotations.node_devices: inventory.to_annotation()})


def test_apply_twice_creates_then_patches(cluster: Cluster) -> None:
    assert cluster.out("apply", "-f", "-", stdin=POD_YAML.replace("LABEL", "1")).strip() == "pod/web created"
    assert cluster.out("apply", "-f", "-", stdin=POD_YAML.replace("LABEL", "2")).strip() == "pod/web configured"
    assert cluster.out("apply", "-f", "-", stdin=POD_YAML.replace("LABEL", "2")).strip() == "pod/web unchanged"
    pod = json.loads(cluster.out("get", "pod", "web", "-o", "json"))
    assert pod["metadata"]["labels"] == {"app": "web", "rev": "2"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]


def test_get_and_describe_nodes_and_pods(cluster: Cluster) -> None:
    cluster.post("/api/v1/nodes", gpu_node("gpu-1"))
    cluster.post(
        "/api/v1/namespaces/default/pods", make_pod("running", node="gpu-1", limits={"cpu": "1", "memory": "1Gi"})
    )
    cluster.post(
        "/api/v1/namespaces/default/pods", make_pod("done", node="gpu-1", limits={"cpu": "2", "memory": "2Gi"})
    )
    cluster.post("/api/v1/namespaces/default/pods", make_pod("elsewhere", node="other", limits={"cpu": "3"}))
    succeeded = {"status": {"phase": "Succeeded"}}
    cluster.http.patch(
        "/api/v1/namespaces/default/pods/done/status",
        json=succeeded,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    nodes = rows(cluster.out("get", "nodes"))
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPUS", "GPU ALLOCATED"]
    assert nodes[1][:3] == ["gpu-1", "Ready", "<none>"]
    assert nodes[1][5:] == ["4x H200", "0%"]
    pods = rows(cluster.out("get", "pods", "-o", "wide"))
    assert pods[0][:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [p[0] for p in pods[1:]] == ["done", "elsewhere", "running"]
    described = cluster.out("describe", "node", "gpu-1")
    allocated = described.split("Allocated resources:")[1]
    assert re.search(r"cpu\s+1 \(12%\)\s+1 \(12%\)", allocated), allocated
    assert re.search(r"memory\s+1Gi \(3%\)", allocated), allocated
    assert "Non-terminated Pods:          (1 in total)" in described
    assert "Name:               gpu-1" in described
    assert "Name:             running" in cluster.out("describe", "pod", "running")


def test_get_watch_sees_a_change(cluster: Cluster) -> None:
    cluster.post("/api/v1/namespaces/default/pods", make_pod("watched"))
    process = subprocess.Popen(
        cluster.kubectl.command("get", "pods", "-w", binary=cluster.binary),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cluster.kubectl.env(),
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=20).split()[0] == "NAME"
        assert lines.get(timeout=20).split()[:3] == ["watched", "0/1", "Pending"]
        patch = {"status": {"phase": "Running"}}
        cluster.http.patch(
            "/api/v1/namespaces/default/pods/watched/status",
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert lines.get(timeout=20).split()[:3] == ["watched", "0/1", "Running"]
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_delete_and_wait(cluster: Cluster) -> None:
    cluster.post("/api/v1/namespaces/default/pods", make_pod("doomed"))
    assert cluster.out("delete", "pod", "doomed", "--wait=true", "--timeout=20s").strip() == 'pod "doomed" deleted'
    missing = cluster.run("get", "pod", "doomed", check=False)
    assert missing.returncode != 0
    assert 'Error from server (NotFound): pods "doomed" not found' in missing.stderr


def test_label_annotate_and_select(kubectl: Kubectl, kube_http: httpx2.Client) -> None:
    assert kube_http.post("/api/v1/nodes", json=gpu_node("n1")).status_code == 201
    assert kube_http.post("/api/v1/nodes", json=make_node("n2")).status_code == 201
    assert kubectl("label", "node", "n1", "pool=gpu").stdout.strip() == "node/n1 labeled"
    assert kubectl("annotate", "node", "n1", "owner=team-a").stdout.strip() == "node/n1 annotated"
    node = kube_http.get("/api/v1/nodes/n1").json()
    assert node["metadata"]["labels"]["pool"] == "gpu"
    assert node["metadata"]["annotations"]["owner"] == "team-a"
    assert kubectl("get", "nodes", "-l", "pool=gpu", "-o", "name").stdout.split() == ["node/n1"]
    assert kubectl("get", "nodes", "-l", "pool notin (gpu)", "-o", "name").stdout.split() == ["node/n2"]
    assert kubectl("get", "nodes", "-l", "!pool", "-o", "name").stdout.split() == ["node/n2"]
    assert kubectl("label", "node", "n1", "pool-").stdout.strip() == "node/n1 unlabeled"
    listed = json.loads(kubectl("get", "nodes", "-o", "json").stdout)
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1", "n2"]


@pytest.mark.skipif(KUBECTL_DISPATCHER is None, reason="no kubectl dispatcher on PATH")
@pytest.mark.parametrize("minor", ["27", "30", "33"])
def test_dispatcher_picks_the_server_version(minor: str, tmp_path: Path) -> None:
    with ApiServer(kubernetes_version=f"1.{minor}") as server:
        (tmp_path / "home").mkdir()
        kubectl = Kubectl(server.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "home", str(KUBECTL_DISPATCHER))
        version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == f"v1.{minor}.0"
    assert version["clientVersion"]["minor"] == minor


def test_api_resources(kubectl: Kubectl) -> None:
    table = rows(kubectl("api-resources").stdout)
    found = {(r[0], r[-1]) for r in table[1:]}
    assert {
        ("pods", "Pod"),
        ("nodes", "Node"),
        ("podgroups", "PodGroup"),
        ("queues", "Queue"),
        ("leases", "Lease"),
    } <= found
    short = {r[0]: r[1] for r in table[1:] if len(r) == 5}
    assert short["podgroups"] == "pg,podgroup-v1beta1"
    assert short["pods"] == "po"


CRD_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
"""
GADGET_YAML = """\
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1}
spec: {color: blue}
"""


def test_crd_then_its_kind(kubectl: Kubectl) -> None:
    assert "created" in kubectl("apply", "-f", "-", stdin=CRD_YAML).stdout
    assert kubectl("apply", "-f", "-", stdin=GADGET_YAML).stdout.strip() == "gadget.example.com/g1 created"
    assert rows(kubectl("get", "gadgets").stdout) == [["NAME", "COLOR"], ["g1", "blue"]]
    assert kubectl("get", "gd", "g1", "-o", "jsonpath={.spec.color}").stdout == "blue"
    assert "configured" in kubectl("apply", "-f", "-", stdin=GADGET_YAML.replace("blue", "red")).stdout
    assert kubectl("get", "gadget", "g1", "-o", "jsonpath={.spec.color}").stdout == "red"


def test_apply_a_manifest_of_stored_kinds(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(
        """\
apiVersion: v1
kind: Namespace
metadata: {name: lj-runtimekit}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: scheduler, namespace: lj-runtimekit}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scheduler}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scheduler}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scheduler}
subjects: [{kind: ServiceAccount, name: scheduler, namespace: lj-runtimekit}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpu-high}
value: 1000
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: runtime, namespace: lj-runtimekit}
spec:
  selector: {matchLabels: {app: runtime}}
  template:
    metadata: {labels: {app: runtime}}
    spec: {containers: [{name: runtime, image: "runtimekit:dev"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: scheduler, namespace: lj-runtimekit}
spec:
  selector: {matchLabels: {app: scheduler}}
  template:
    metadata: {labels: {app: scheduler}}
    spec: {serviceAccountName: scheduler, containers: [{name: scheduler, image: "runtimekit:dev"}]}
""",
        encoding="utf-8",
    )
    created = kubectl("apply", "-f", str(manifest)).stdout.splitlines()
    assert len(created) == 7
    assert all(line.endswith(" created") for line in created)
    again = kubectl("apply", "-f", str(manifest)).stdout.splitlines()
    assert all(line.endswith(" unchanged") for line in again)
    assert "scheduler" in kubectl("get", "deploy", "-n", "lj-runtimekit").stdout
