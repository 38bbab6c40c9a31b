"""`kubectl apply --server-side` with the real kubectl against the embedded server, as kubectl's
test/cmd/apply.sh runs it: create on apply, the managers kubectl names, managedFields hidden from
`get -o yaml` unless `--show-managed-fields`, a subset re-applied, a conflict with another manager
and `--force-conflicts`, `--dry-run=server`, a custom resource, and the move from client-side apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures.apiserver import Kubectl

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  labels: {app: nginx}
spec:
  replicas: REPLICAS
  selector:
    matchLabels: {app: nginx}
  template:
    metadata:
      labels: {app: nginx}
    spec:
      containers:
      - name: nginx
        image: IMAGE
        ports:
        - containerPort: 80
SIDECAR"""
SIDECAR = """\
      - name: side
        image: busybox:1.36
"""
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items: {type: object, properties: {name: {type: string}, count: {type: integer}}}
"""


def manifest(tmp_path: Path, *, image: str = "nginx:1.25", replicas: int = 2, sidecar: bool = True) -> str:
    text = DEPLOYMENT.replace("IMAGE", image).replace("REPLICAS", str(replicas))
    path = tmp_path / f"deploy-{image.replace(':', '-')}-{replicas}-{sidecar}.yaml"
    path.write_text(text.replace("SIDECAR", SIDECAR if sidecar else ""))
    return str(path)


def managers(kubectl: Kubectl, *target: str) -> dict[tuple[str, str], Any]:
    obj = json.loads(kubectl("get", *target, "-o", "json", "--show-managed-fields").stdout)
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


def test_server_side_apply_creates_hides_and_reapplies_a_subset(kubectl: Kubectl, tmp_path: Path) -> None:
    created = kubectl("apply", "--server-side", "-f", manifest(tmp_path))
    assert created.stdout.strip() == "deployment.apps/nginx serverside-applied"
    assert "managedFields" not in kubectl("get", "deploy", "nginx", "-o", "yaml").stdout
    owned = managers(kubectl, "deploy", "nginx")[("kubectl", "Apply")]
    containers = owned["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert sorted(containers) == ['k:{"name":"nginx"}', 'k:{"name":"side"}']
    dry = kubectl("apply", "--server-side", "--dry-run=server", "-f", manifest(tmp_path, sidecar=False))
    assert dry.stdout.strip() == "deployment.apps/nginx serverside-applied (server dry run)"
    names = "{.spec.template.spec.containers[*].name}"
    assert kubectl("get", "deploy", "nginx", "-o", f"jsonpath={names}").stdout == "nginx side"
    kubectl("apply", "--server-side", "-f", manifest(tmp_path, image="nginx:1.26", sidecar=False))
    assert kubectl("get", "deploy", "nginx", "-o", f"jsonpath={names}").stdout == "nginx"
    kubectl("label", "deploy", "nginx", "team=a")
    assert managers(kubectl, "deploy", "nginx")[("kubectl-label", "Update")] == {
        "f:metadata": {"f:labels": {"f:team": {}}}
    }


def test_conflict_with_another_manager_then_force_conflicts(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "--server-side", "-f", manifest(tmp_path))
    other = manifest(tmp_path, image="nginx:1.27")
    refused = kubectl("apply", "--server-side", "--field-manager=rollout", "-f", other, check=False)
    assert refused.returncode == 1
    conflict = 'conflict with "kubectl": .spec.template.spec.containers[name="nginx"].image'
    assert f"error: Apply failed with 1 conflict: {conflict}" in refused.stderr
    assert "--force-conflicts" in refused.stderr
    kubectl("apply", "--server-side", "--field-manager=rollout", "--force-conflicts", "-f", other)
    image = "{.spec.template.spec.containers[0].image}"
    assert kubectl("get", "deploy", "nginx", "-o", f"jsonpath={image}").stdout == "nginx:1.27"
    owners = managers(kubectl, "deploy", "nginx")
    nginx_fields = owners[("kubectl", "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"nginx"}']
    assert "f:image" not in nginx_fields


def test_apply_of_a_custom_resource_merges_its_map_list(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "crd.yaml").write_text(CRD)
    kubectl("apply", "--server-side", "-f", str(tmp_path / "crd.yaml"))
    kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s")
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n  parts: [{name: PART, count: 1}]\n"
    for manager, part in (("one", "a"), ("two", "b")):
        (tmp_path / f"{part}.yaml").write_text(widget.replace("PART", part))
        kubectl("apply", "--server-side", f"--field-manager={manager}", "-f", str(tmp_path / f"{part}.yaml"))
    parts = json.loads(kubectl("get", "widget", "w", "-o", "json").stdout)["spec"]["parts"]
    assert parts == [{"name": "a", "count": 1}, {"name": "b", "count": 1}]


def test_client_side_apply_moves_to_server_side(kubectl: Kubectl, tmp_path: Path) -> None:
    """kubectl 1.27+: the first server-side apply of an object made by client-side apply takes the
    fields of its last-applied-configuration without a conflict, and later applies own them."""
    kubectl("apply", "-f", manifest(tmp_path))
    assert set(managers(kubectl, "deploy", "nginx")) == {("kubectl-client-side-apply", "Update")}
    kubectl("apply", "--server-side", "-f", manifest(tmp_path, replicas=3))
    owners = managers(kubectl, "deploy", "nginx")
    assert ("kubectl-client-side-apply", "Update") not in owners
    assert owners[("kubectl", "Apply")]["f:spec"]["f:replicas"] == {}
    kubectl("apply", "--server-side", "-f", manifest(tmp_path, replicas=3, sidecar=False))
    names = "{.spec.template.spec.containers[*].name}"
    assert kubectl("get", "deploy", "nginx", "-o", f"jsonpath={names}").stdout == "nginx"
