"""The Endpoints and EndpointSlice controller against the embedded API server, driven by the real
kubectl as a user would (`kubectl expose`, `scale`, `get endpoints`): ready and not-ready addresses,
named target ports, headless Services, updates on pod and Service changes, clean-up."""

from __future__ import annotations

from typing import Any

from fixtures.apiserver import Kubectl
from fixtures.controllers import NS, PODS, Workloads, set_ready, template
from runtimekit.kube.errors import KubeError

DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
ENDPOINTS = f"/api/v1/namespaces/{NS}/endpoints"
SLICES = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"
EXTERNAL = """\
apiVersion: v1
kind: Service
metadata: {name: external}
spec:
  ports: [{port: 80}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: external}
subsets: [{addresses: [{ip: 192.0.2.1}], ports: [{port: 80}]}]
"""


def deployment(name: str, replicas: int) -> dict[str, Any]:
    pod = template(name)
    pod["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": pod},
    }


def endpoints(w: Workloads, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = w.http.get(f"{ENDPOINTS}/{name}")
    except KubeError as exc:
        if exc.code == 404:
            return None
        raise
    return found


def addresses(w: Workloads, name: str, field: str = "addresses") -> list[tuple[str, int]]:
    found = endpoints(w, name) or {}
    return sorted(
        (a["ip"], p["port"]) for s in found.get("subsets") or [] for a in s.get(field) or [] for p in s["ports"]
    )


def slices(w: Workloads, name: str) -> list[dict[str, Any]]:
    return w.http.list(SLICES, {"labelSelector": f"kubernetes.io/service-name={name}"})[0]


def test_kubectl_expose_gives_a_service_with_endpoints(workloads: Workloads, kubectl: Kubectl) -> None:
    workloads.http.post(DEPLOY, deployment("web", 2))
    kubectl("expose", "deployment", "web", "--port=80", "--target-port=http")
    got = workloads.wait(lambda: len(addresses(workloads, "web")) == 2 and addresses(workloads, "web"), "2 addresses")
    ips = sorted(p["status"]["podIP"] for p in workloads.pods("app=web"))
    assert got == [(ip, 8080) for ip in ips]
    [subset] = (endpoints(workloads, "web") or {})["subsets"]
    assert subset["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert {a["targetRef"]["kind"] for a in subset["addresses"]} == {"Pod"}
    shown = kubectl("get", "endpoints", "web").stdout
    assert all(f"{ip}:8080" in shown for ip in ips)

    [made] = workloads.wait(lambda: slices(workloads, "web") if len(_ready(workloads, "web")) == 2 else None, "slice")
    assert made["metadata"]["name"].startswith("web-")
    assert made["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert made["addressType"] == "IPv4"
    assert made["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
    assert "web-" in kubectl("get", "endpointslices").stdout

    kubectl("scale", "deployment", "web", "--replicas=1")
    workloads.wait(lambda: len(addresses(workloads, "web")) == 1, "one address after scale-down")
    workloads.wait(lambda: len(_ready(workloads, "web")) == 1, "one endpoint in the slice")

    kubectl("delete", "service", "web")
    workloads.wait(lambda: endpoints(workloads, "web") is None, "the Endpoints deleted with the Service")


def _ready(w: Workloads, name: str) -> list[str]:
    return [
        a for s in slices(w, name) for e in s.get("endpoints") or [] if e["conditions"]["ready"] for a in e["addresses"]
    ]


def test_not_ready_pods_are_not_ready_addresses(workloads: Workloads, kubectl: Kubectl) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-0", "labels": {"app": "db"}}}
    pod["spec"] = {"containers": [{"name": "c", "image": "postgres"}]}
    workloads.http.post(PODS, pod)
    status = {"phase": "Running", "podIP": "10.9.0.7", "conditions": [{"type": "Ready", "status": "False"}]}
    workloads.http.patch(f"{PODS}/db-0/status", {"status": status}, "merge")
    kubectl("create", "service", "clusterip", "db", "--clusterip=None", "--tcp=5432:5432")
    workloads.wait(lambda: addresses(workloads, "db", "notReadyAddresses") == [("10.9.0.7", 5432)], "not ready")
    assert addresses(workloads, "db") == []
    assert (endpoints(workloads, "db") or {})["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    set_ready(workloads.http, workloads.http.get(f"{PODS}/db-0"))
    workloads.http.patch(f"{PODS}/db-0/status", {"status": {"podIP": "10.9.0.7"}}, "merge")
    workloads.wait(lambda: addresses(workloads, "db") == [("10.9.0.7", 5432)], "ready once the pod is")


def test_a_service_without_selector_keeps_its_own_endpoints(workloads: Workloads, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=EXTERNAL)
    workloads.http.post(DEPLOY, deployment("other", 1))  # the controller at work on something else
    workloads.wait(lambda: workloads.pods("app=other"), "a pod")
    assert addresses(workloads, "external") == [("192.0.2.1", 80)]
