"""Day-one semantics through the real kubectl: field selectors on fields that are never absent in
kube (a Go bool or int reads `false`/`0`), immutable ConfigMaps and Secrets, and `stringData`. The
cases are kube-apiserver's (pkg/registry/*/strategy.go `ToSelectableFields`, ValidateConfigMapUpdate,
ValidateSecretUpdate) and the messages kubectl prints for them."""

from __future__ import annotations

import base64
import json

import httpx2
import pytest

from fixtures.apiserver import Kubectl, make_node, make_pod

IMMUTABLE = "field is immutable when `immutable` is set"


def names(kubectl: Kubectl, *args: str) -> list[str]:
    return kubectl("get", *args, "-o", "name").stdout.split()


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.unschedulable=false", ["node/free"]),
        ("spec.unschedulable!=true", ["node/free"]),
        ("spec.unschedulable=true", ["node/cordoned"]),
        ("spec.unschedulable!=false", ["node/cordoned"]),
    ],
)
def test_node_unschedulable_absent_reads_false(
    kube_http: httpx2.Client, kubectl: Kubectl, selector: str, expected: list[str]
) -> None:
    for name in ("free", "cordoned"):
        assert kube_http.post("/api/v1/nodes", json=make_node(name)).status_code == 201
    kubectl("cordon", "cordoned")
    assert names(kubectl, "nodes", "--field-selector", selector) == expected


def test_pod_host_network_absent_reads_false(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    assert kube_http.post("/api/v1/namespaces/default/pods", json=make_pod("plain")).status_code == 201
    host = {**make_pod("host"), "spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "x"}]}}
    assert kube_http.post("/api/v1/namespaces/default/pods", json=host).status_code == 201
    assert names(kubectl, "pods", "--field-selector", "spec.hostNetwork=false") == ["pod/plain"]
    assert names(kubectl, "pods", "--field-selector", "spec.hostNetwork=true") == ["pod/host"]


def test_job_successful_and_replicaset_replicas_count_from_zero(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    kubectl("create", "job", "once", "--image=busybox")
    assert names(kubectl, "jobs", "--field-selector", "status.successful=0") == ["job.batch/once"]
    assert names(kubectl, "jobs", "--field-selector", "status.successful=1") == []
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        },
    }
    assert kube_http.post("/apis/apps/v1/namespaces/default/replicasets", json=rs).status_code == 201
    assert names(kubectl, "rs", "--field-selector", "status.replicas=0") == ["replicaset.apps/web"]


def test_unsupported_field_label_is_kubes_bad_request(kubectl: Kubectl) -> None:
    done = kubectl("get", "configmaps", "--field-selector", "data.x=1", check=False)
    assert done.returncode == 1
    assert "field label not supported: data.x" in done.stderr


@pytest.mark.parametrize("kind", ["configmap", "secret"])
def test_immutable_data_is_refused(kubectl: Kubectl, kind: str) -> None:
    create = ["create", kind, "frozen", "--from-literal=a=1"]
    kubectl(*(create[:2] + (["generic"] if kind == "secret" else []) + create[2:]))
    kubectl("patch", kind, "frozen", "-p", '{"immutable": true}')
    field = "data"
    value = "Mg==" if kind == "secret" else "2"  # "2", where it was "1"
    done = kubectl("patch", kind, "frozen", "-p", json.dumps({field: {"a": value}}), check=False)
    assert done.returncode == 1
    title = "ConfigMap" if kind == "configmap" else "Secret"
    assert f'The {title} "frozen" is invalid: data: Forbidden: {IMMUTABLE}' in done.stderr
    done = kubectl("patch", kind, "frozen", "-p", '{"immutable": false}', check=False)
    assert f"immutable: Forbidden: {IMMUTABLE}" in done.stderr
    unset = '[{"op": "remove", "path": "/immutable"}]'
    done = kubectl("patch", kind, "frozen", "--type=json", "-p", unset, check=False)
    assert f"immutable: Forbidden: {IMMUTABLE}" in done.stderr
    kubectl("label", kind, "frozen", "still=editable")  # metadata stays mutable
    kubectl("delete", kind, "frozen")  # and it can be deleted


def test_secret_type_cannot_change(kubectl: Kubectl) -> None:
    kubectl("create", "secret", "generic", "s", "--from-literal=a=1")
    done = kubectl("patch", "secret", "s", "-p", '{"type": "kubernetes.io/tls"}', check=False)
    assert 'type: Invalid value: "kubernetes.io/tls": field is immutable' in done.stderr


def test_secret_string_data_is_folded_into_data(kubectl: Kubectl) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds"},
        "data": {"user": base64.b64encode(b"old").decode(), "keep": base64.b64encode(b"k").decode()},
        "stringData": {"user": "admin"},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    secret = json.loads(kubectl("get", "secret", "creds", "-o", "json").stdout)
    assert "stringData" not in secret
    assert secret["type"] == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {"user": "admin", "keep": "k"}
