"""Server-side apply over HTTP, with cases of kube-apiserver's test/integration/apiserver/apply tests
(TestApplyManagedFields, TestApplyRemovesEmptyManagedFields, TestApplyRequiresFieldManager,
TestApplyRemoveContainerPort, TestClearManagedFieldsWithMergePatch...) and the Server-Side Apply docs
as test data: managedFields of applies and of ordinary writes, conflicts, force, subset applies,
list merge by keys, status, CRDs, dry run."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import make_pod

CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
PODS = "/api/v1/namespaces/default/pods"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def apply(http: httpx2.Client, path: str, body: dict[str, Any], manager: str, **params: str) -> httpx2.Response:
    return http.patch(
        path, content=json.dumps(body).encode(), headers=APPLY, params={"fieldManager": manager, **params}
    )


def fields_of(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """(manager, operation) -> fieldsV1, after checking each entry's form."""
    out = {}
    for entry in obj["metadata"].get("managedFields", []):
        assert entry["fieldsType"] == "FieldsV1"
        assert entry["time"].endswith("Z")
        out[(entry["manager"], entry["operation"])] = entry["fieldsV1"]
    return out


def config_map(data: dict[str, str], **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "test-cm", "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def nginx(ports: list[dict[str, Any]] | None = None, replicas: int | None = 3) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "nginx", "image": "nginx:latest"}
    if ports is not None:
        container["ports"] = ports
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [container]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "deployment", "labels": {"app": "nginx"}},
        "spec": spec,
    }


def test_managed_fields_of_an_apply_and_of_merge_patches(kube_http: httpx2.Client) -> None:
    """TestApplyManagedFields: an updater changing an applied field takes it; entries keep kube's form."""
    created = apply(kube_http, f"{CMS}/test-cm", config_map({"key": "value"}, **{"test-label": "test"}), "apply_test")
    assert created.status_code == 201, created.text
    for patch in ({"data": {"new-key": "value"}}, {"data": {"key": "new value"}}):
        assert kube_http.patch(
            f"{CMS}/test-cm", json=patch, headers=MERGE, params={"fieldManager": "updater"}
        ).is_success
    obj = kube_http.get(f"{CMS}/test-cm").json()
    entries = obj["metadata"]["managedFields"]
    assert [list(e) for e in entries] == [["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]] * 2
    assert fields_of(obj) == {
        ("apply_test", "Apply"): {"f:metadata": {"f:labels": {"f:test-label": {}}}},
        ("updater", "Update"): {"f:data": {"f:key": {}, "f:new-key": {}}},
    }
    assert obj["data"] == {"key": "new value", "new-key": "value"}


def test_apply_needs_a_field_manager_and_drops_empty_entries(kube_http: httpx2.Client) -> None:
    """TestApplyRequiresFieldManager and TestApplyRemovesEmptyManagedFields."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "test-cm", "namespace": "default"}}
    refused = kube_http.patch(f"{CMS}/test-cm", content=json.dumps(body).encode(), headers=APPLY)
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    assert apply(kube_http, f"{CMS}/test-cm", body, "apply_test").status_code == 201
    again = apply(kube_http, f"{CMS}/test-cm", body, "apply_test")
    assert again.status_code == 200
    assert "managedFields" not in again.json()["metadata"]


def test_apply_of_a_subset_removes_what_the_manager_dropped(kube_http: httpx2.Client) -> None:
    """TestApplyRemoveContainerPort, and the list-map key of ports (containerPort, protocol defaulted)."""
    first = apply(kube_http, f"{DEPLOYMENTS}/deployment", nginx([{"containerPort": 80}]), "apply_test").json()
    container = fields_of(first)[("apply_test", "Apply")]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert container == {
        'k:{"name":"nginx"}': {
            ".": {},
            "f:image": {},
            "f:name": {},
            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
        }
    }
    same = apply(
        kube_http, f"{DEPLOYMENTS}/deployment", nginx([{"containerPort": 80, "protocol": "TCP"}]), "apply_test"
    )
    assert same.json()["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}
    ]
    gone = apply(kube_http, f"{DEPLOYMENTS}/deployment", nginx(replicas=None), "apply_test").json()
    assert "ports" not in gone["spec"]["template"]["spec"]["containers"][0]
    assert gone["spec"]["replicas"] == 1  # dropped by its only manager: back to the default


def test_conflicts_name_fields_and_managers_and_force_takes_them(kube_http: httpx2.Client) -> None:
    path = f"{DEPLOYMENTS}/deployment"
    assert apply(kube_http, path, nginx(), "owner").is_success
    shared = apply(kube_http, path, nginx(), "co-owner")  # the same values: no conflict, owned by both
    assert shared.status_code == 200
    changed = nginx(replicas=5)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27"
    refused = apply(kube_http, path, changed, "other")
    assert refused.status_code == 409
    status = refused.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 4 conflicts: conflicts with "co-owner":\n- .spec.replicas\n'
        '- .spec.template.spec.containers[name="nginx"].image\nconflicts with "owner":\n- .spec.replicas\n'
        '- .spec.template.spec.containers[name="nginx"].image'
    )
    assert {"reason": "FieldManagerConflict", "message": 'conflict with "owner"', "field": ".spec.replicas"} in (
        status["details"]["causes"]
    )
    single = apply(kube_http, path, nginx(replicas=5), "other")
    assert single.json()["message"].startswith('Apply failed with 2 conflicts: conflicts with "co-owner":')
    kube_http.patch(path, json={"spec": {"paused": True}}, headers=MERGE, params={"fieldManager": "pauser"})
    one = apply(kube_http, path, {**nginx(replicas=None), "spec": {**nginx()["spec"], "paused": False}}, "x")
    assert one.json()["message"] == ('Apply failed with 1 conflict: conflict with "pauser" using apps/v1: .spec.paused')
    forced = apply(kube_http, path, nginx(replicas=5), "other", force="true")
    assert forced.status_code == 200
    assert forced.json()["spec"]["replicas"] == 5
    managers = fields_of(forced.json())
    assert managers[("other", "Apply")]["f:spec"]["f:replicas"] == {}
    assert "f:replicas" not in managers[("owner", "Apply")]["f:spec"]


def test_ordinary_writes_record_update_entries(kube_http: httpx2.Client) -> None:
    body = make_pod("p")
    body["metadata"] = {"name": "p"}
    pod = kube_http.post(PODS, json=body, params={"fieldManager": "kubectl-create"}).json()
    created = fields_of(pod)[("kubectl-create", "Update")]
    assert created["f:spec"]["f:containers"]['k:{"name":"main"}']["f:image"] == {}
    assert created["f:spec"]["f:restartPolicy"] == {}  # defaults are the creator's, as kube decodes them
    assert "f:status" not in created
    ua = {**MERGE, "User-Agent": "kubectl/v1.31.0 (linux/amd64) kubernetes/abc"}  # no fieldManager: the program
    labelled = kube_http.patch(f"{PODS}/p", json={"metadata": {"labels": {"a": "b"}}}, headers=ua)
    assert fields_of(labelled.json())[("kubectl", "Update")] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
    forced = kube_http.patch(f"{PODS}/p", json={}, headers=MERGE, params={"force": "true"})
    assert forced.status_code == 422
    assert forced.json()["message"].endswith("force: Forbidden: may not be specified for non-apply patch")


def test_managed_fields_can_be_cleared_and_are_not_tracked_after(kube_http: httpx2.Client) -> None:
    """TestClearManagedFieldsWithMergePatch; an object without entries is tracked again from its next apply."""
    apply(kube_http, f"{CMS}/test-cm", config_map({"key": "value"}), "apply_test")
    cleared = kube_http.patch(f"{CMS}/test-cm", json={"metadata": {"managedFields": [{}]}}, headers=MERGE)
    assert "managedFields" not in cleared.json()["metadata"]
    patched = kube_http.patch(f"{CMS}/test-cm", json={"data": {"b": "2"}}, headers=MERGE, params={"fieldManager": "u"})
    assert "managedFields" not in patched.json()["metadata"]
    applied = apply(kube_http, f"{CMS}/test-cm", config_map({"key": "value"}), "apply_test").json()
    assert fields_of(applied) == {
        ("apply_test", "Apply"): {"f:data": {"f:key": {}}},
        ("before-first-apply", "Update"): {"f:data": {".": {}, "f:b": {}, "f:key": {}}},
    }


def test_apply_refusals_dry_run_and_cbor(kube_http: httpx2.Client) -> None:
    body = config_map({"a": "1"})
    dry = apply(kube_http, f"{CMS}/test-cm", body, "m", dryRun="All")
    assert dry.status_code == 201
    assert kube_http.get(f"{CMS}/test-cm").status_code == 404
    with_fields = {**body, "metadata": {**body["metadata"], "managedFields": [{"manager": "x"}]}}
    assert (
        apply(kube_http, f"{CMS}/test-cm", with_fields, "m").json()["message"] == "metadata.managedFields must be nil"
    )
    too_long = apply(kube_http, f"{CMS}/test-cm", body, "m" * 129).json()["message"]
    assert too_long == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes'
    other_name = {**body, "metadata": {"name": "other"}}
    assert apply(kube_http, f"{CMS}/test-cm", other_name, "m").status_code == 400
    cbor = kube_http.patch(f"{CMS}/test-cm", content=b"\xa0", headers={"Content-Type": "application/apply-patch+cbor"})
    assert cbor.status_code == 415
    assert "application/apply-patch+yaml" in cbor.json()["message"]


def test_status_apply_owns_status_only(kube_http: httpx2.Client) -> None:
    apply(kube_http, f"{DEPLOYMENTS}/deployment", nginx(), "apply_test")
    status = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "deployment"}}
    status["status"] = {"observedGeneration": 1, "conditions": [{"type": "Available", "status": "True"}]}
    done = apply(kube_http, f"{DEPLOYMENTS}/deployment/status", status, "controller")
    assert done.status_code == 200, done.text
    entry = next(e for e in done.json()["metadata"]["managedFields"] if e["manager"] == "controller")
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {
        "f:status": {
            "f:conditions": {'k:{"type":"Available"}': {".": {}, "f:status": {}, "f:type": {}}},
            "f:observedGeneration": {},
        }
    }
    main = apply(kube_http, f"{DEPLOYMENTS}/deployment", {**nginx(), "status": {"replicas": 9}}, "apply_test")
    assert main.json()["status"].get("replicas") != 9  # the main resource does not apply status


@pytest.mark.parametrize("list_type", ["map", "atomic"])
def test_custom_resource_lists_merge_by_their_schema(kube_http: httpx2.Client, list_type: str) -> None:
    items: dict[str, Any] = {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
    if list_type == "map":
        items |= {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"items": items}}}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }
    assert kube_http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd).is_success
    path = "/apis/example.com/v1/namespaces/default/widgets/w"
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert apply(kube_http, path, {**widget, "spec": {"items": [{"name": "a"}]}}, "one").status_code == 201
    second = apply(kube_http, path, {**widget, "spec": {"items": [{"name": "b"}]}}, "two")
    if list_type == "map":
        assert second.json()["spec"]["items"] == [{"name": "a"}, {"name": "b"}]
        owned = fields_of(second.json())[("two", "Apply")]
        assert owned == {"f:spec": {"f:items": {'k:{"name":"b"}': {".": {}, "f:name": {}}}}}
    else:
        assert second.status_code == 409
        assert second.json()["message"] == 'Apply failed with 1 conflict: conflict with "one": .spec.items'


def test_many_update_managers_fold_into_ancient_changes(kube_http: httpx2.Client) -> None:
    """kube keeps at most 10 update managers: the oldest fold into `ancient-changes`."""
    apply(kube_http, f"{CMS}/test-cm", config_map({"a": "1"}), "applier")
    for i in range(12):
        patch = {"data": {f"k{i}": "v"}}
        kube_http.patch(f"{CMS}/test-cm", json=patch, headers=MERGE, params={"fieldManager": f"m{i:02}"})
    entries = kube_http.get(f"{CMS}/test-cm").json()["metadata"]["managedFields"]
    updates = [e["manager"] for e in entries if e["operation"] == "Update"]
    assert len(updates) == 10
    assert "ancient-changes" in updates
    assert entries[0]["manager"] == "applier"  # Apply entries first
    folded = next(e for e in entries if e["manager"] == "ancient-changes")
    assert set(folded["fieldsV1"]["f:data"]) >= {"f:k0", "f:k1"}
