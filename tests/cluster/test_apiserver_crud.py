"""Write semantics over HTTP: create, update, patch, status subresources, delete, finalizers,
binding, and the Status errors a real API server gives for bad requests."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import make_node, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.podlog import ContainerLog

PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
JSONPATCH = {"Content-Type": "application/json-patch+json"}


def assert_status(response: httpx2.Response, code: int, reason: str, message: str | None = None) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status"
    assert body["reason"] == reason
    assert body["code"] == code
    if message is not None:
        assert body["message"] == message
    return body


def create(http: httpx2.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=obj)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def deployment(name: str, image: str = "app:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


# create -------------------------------------------------------------------------------------------


def test_create_fills_system_metadata_and_pod_defaults(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p1", limits={"cpu": "1", "memory": "1Gi"}, node=None))
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["uid"]
    assert meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    assert kube_http.get(f"{PODS}/p1").json() == pod


def test_resource_versions_increase_globally(kube_http: httpx2.Client) -> None:
    versions = [int(create(kube_http, PODS, make_pod(f"p{i}"))["metadata"]["resourceVersion"]) for i in range(3)]
    cm = create(kube_http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    versions.append(int(cm["metadata"]["resourceVersion"]))
    assert versions == sorted(versions)
    assert len(set(versions)) == 4


def test_pod_status_is_reset_on_create(kube_http: httpx2.Client) -> None:
    pod = make_pod("p")
    pod["status"] = {"phase": "Running"}
    assert create(kube_http, PODS, pod)["status"]["phase"] == "Pending"


def test_node_status_is_kept_on_create(kube_http: httpx2.Client) -> None:
    node = create(kube_http, "/api/v1/nodes", make_node("n1"))
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert "namespace" not in node["metadata"]


def test_generate_name(kube_http: httpx2.Client) -> None:
    pod = make_pod("")
    del pod["metadata"]["name"]  # type: ignore[attr-defined]
    pod["metadata"]["generateName"] = "worker-"  # type: ignore[index]
    names = {create(kube_http, PODS, pod)["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3
    assert all(name.startswith("worker-") and len(name) == len("worker-") + 5 for name in names)


def test_create_twice_is_already_exists(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    assert_status(kube_http.post(PODS, json=make_pod("p")), 409, "AlreadyExists", 'pods "p" already exists')


def test_create_in_a_missing_namespace(kube_http: httpx2.Client) -> None:
    response = kube_http.post("/api/v1/namespaces/nope/pods", json=make_pod("p", namespace="nope"))
    body = assert_status(response, 404, "NotFound", 'namespaces "nope" not found')
    assert body["details"] == {"name": "nope", "kind": "namespaces"}


@pytest.mark.parametrize(
    ("body", "code", "reason", "fragment"),
    [
        ("{not json", 400, "BadRequest", "json parse error"),
        ('["a list"]', 400, "BadRequest", "must be of type Pod"),
        (json.dumps({**make_pod("p"), "apiVersion": "v2"}), 400, "BadRequest", "the API version in the data (v2)"),
        (
            json.dumps({**make_pod("p"), "kind": "Node"}),
            400,
            "BadRequest",
            'Node in version "v1" cannot be handled as a Pod',
        ),
        (json.dumps(make_pod("p", namespace="other")), 400, "BadRequest", "does not match the namespace"),
        (json.dumps(make_pod("Bad_Name")), 422, "Invalid", 'Pod "Bad_Name" is invalid: metadata.name: Invalid value'),
        (json.dumps({"metadata": {"name": "p"}, "spec": {}}), 422, "Invalid", "spec.containers: Required value"),
        (
            json.dumps({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            422,
            "Invalid",
            "name or generateName is required",
        ),
        (json.dumps(make_pod("p", labels={"bad key!": "v"})), 422, "Invalid", "metadata.labels"),
    ],
    ids=["malformed", "not-object", "api-version", "kind", "namespace", "name", "containers", "no-name", "label"],
)
def test_bad_create_requests(kube_http: httpx2.Client, body: str, code: int, reason: str, fragment: str) -> None:
    response = kube_http.post(PODS, content=body, headers={"Content-Type": "application/json"})
    assert fragment in assert_status(response, code, reason)["message"]


def test_invalid_lists_every_cause(kube_http: httpx2.Client) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "a", "image": "i"}]}}
    body = assert_status(kube_http.post(PODS, json=pod), 422, "Invalid")
    assert body["message"].startswith('Pod "p" is invalid: [')
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.containers[0].image", "spec.containers[1].name"}


@pytest.mark.parametrize(
    ("method", "path", "code", "reason"),
    [
        ("GET", "/api/v1/namespaces/default/frobs", 404, "NotFound"),
        ("GET", "/apis/nope.example.com/v1/things", 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/pods/p/nosuch", 404, "NotFound"),
        ("POST", "/api/v1/pods", 405, "MethodNotAllowed"),
        ("POST", "/api/v1/namespaces/default/pods/p", 405, "MethodNotAllowed"),
        ("PUT", "/api/v1/namespaces/default/pods", 405, "MethodNotAllowed"),
        ("GET", "/api/v1/namespaces/default/bindings", 405, "MethodNotAllowed"),
        ("GET", "/api/v1/namespaces/default/nodes/n1", 404, "NotFound"),
        ("GET", "/api/v1/namespaces/default/pods/p/binding", 405, "MethodNotAllowed"),
        ("DELETE", "/api/v1/namespaces/default/pods/p/status", 405, "MethodNotAllowed"),
    ],
)
def test_bad_paths(kube_http: httpx2.Client, method: str, path: str, code: int, reason: str) -> None:
    assert_status(kube_http.request(method, path, json={}), code, reason)


def test_server_keeps_serving_after_an_internal_error(
    apiserver: ApiServer, kube_http: httpx2.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(apiserver.api, "create", explode)
    body = assert_status(kube_http.post(PODS, json=make_pod("p")), 500, "InternalError")
    assert "boom" in body["message"]
    monkeypatch.undo()
    create(kube_http, PODS, make_pod("p"))


def test_dry_run_create_does_not_store(kube_http: httpx2.Client) -> None:
    response = kube_http.post(PODS, params={"dryRun": "All"}, json=make_pod("dry"))
    assert response.status_code == 201
    assert response.json()["metadata"]["name"] == "dry"
    assert_status(kube_http.get(f"{PODS}/dry"), 404, "NotFound")


def test_cluster_scoped_create_drops_the_namespace(kube_http: httpx2.Client) -> None:
    node = make_node("n1")
    node["metadata"]["namespace"] = "default"  # type: ignore[index]
    assert "namespace" not in create(kube_http, "/api/v1/nodes", node)["metadata"]


def test_yaml_body_is_accepted(kube_http: httpx2.Client) -> None:
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n"
    response = kube_http.post(
        "/api/v1/namespaces/default/configmaps", content=body, headers={"Content-Type": "application/yaml"}
    )
    assert response.status_code == 201
    assert response.json()["data"] == {"k": "v"}


# update -------------------------------------------------------------------------------------------


def test_update_with_a_stale_resource_version_conflicts(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    pod["metadata"]["labels"] = {"v": "1"}
    fresh = kube_http.put(f"{PODS}/p", json=pod)
    assert fresh.status_code == 200
    assert int(fresh.json()["metadata"]["resourceVersion"]) > int(pod["metadata"]["resourceVersion"])
    pod["metadata"]["labels"] = {"v": "2"}
    message = (
        'Operation cannot be fulfilled on pods "p": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert_status(kube_http.put(f"{PODS}/p", json=pod), 409, "Conflict", message)


def test_unconditional_update_without_resource_version(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    del pod["metadata"]["resourceVersion"]
    pod["metadata"]["labels"] = {"a": "b"}
    assert kube_http.put(f"{PODS}/p", json=pod).json()["metadata"]["labels"] == {"a": "b"}


def test_update_name_mismatch_and_missing_object(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    message = "the name of the object (p) does not match the name on the URL (q)"
    assert_status(kube_http.put(f"{PODS}/q", json=pod), 400, "BadRequest", message)
    pod["metadata"]["name"] = "gone"
    assert_status(kube_http.put(f"{PODS}/gone", json=pod), 404, "NotFound", 'pods "gone" not found')


def test_noop_update_keeps_the_resource_version(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    assert (
        kube_http.put(f"{PODS}/p", json=pod).json()["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    )


def test_pod_spec_is_immutable_except_images(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    pod["spec"]["containers"][0]["image"] = "busybox:1.37"
    pod = kube_http.put(f"{PODS}/p", json=pod).json()
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.37"
    pod["spec"]["nodeName"] = "n1"
    body = assert_status(kube_http.put(f"{PODS}/p", json=pod), 422, "Invalid")
    assert "spec: Forbidden: pod updates may not change fields" in body["message"]


def test_status_subresource_splits_spec_and_status(kube_http: httpx2.Client) -> None:
    created = create(kube_http, DEPLOYMENTS, deployment("d"))
    assert created["metadata"]["generation"] == 1
    assert "status" not in created
    created["status"] = {"replicas": 5}
    created["spec"]["replicas"] = 3
    updated = kube_http.put(f"{DEPLOYMENTS}/d", json=created).json()
    assert "status" not in updated, "the main resource ignores status"
    assert updated["spec"]["replicas"] == 3
    assert updated["metadata"]["generation"] == 2
    updated["status"] = {"replicas": 3}
    updated["spec"]["replicas"] = 9
    updated["metadata"]["labels"] = {"ignored": "yes"}
    status = kube_http.put(f"{DEPLOYMENTS}/d/status", json=updated).json()
    assert status["status"] == {"replicas": 3}
    assert status["spec"]["replicas"] == 3
    assert status["metadata"]["generation"] == 2
    assert "labels" not in status["metadata"]
    relabel = kube_http.patch(f"{DEPLOYMENTS}/d", json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE).json()
    assert relabel["metadata"]["generation"] == 2, "metadata changes do not bump generation"
    got = kube_http.get(f"{DEPLOYMENTS}/d/status").json()
    assert got["status"] == {"replicas": 3}


def test_pod_status_patch(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    patch = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    pod = kube_http.patch(f"{PODS}/p/status", json=patch, headers=STRATEGIC).json()
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["qosClass"] == "BestEffort"
    ignored = kube_http.patch(f"{PODS}/p", json={"status": {"phase": "Failed"}}, headers=MERGE).json()
    assert ignored["status"]["phase"] == "Running"


# patch --------------------------------------------------------------------------------------------


def test_patch_types(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p", labels={"a": "1"}))
    merged = kube_http.patch(f"{PODS}/p", json={"metadata": {"labels": {"a": None, "b": "2"}}}, headers=MERGE).json()
    assert merged["metadata"]["labels"] == {"b": "2"}
    strategic = {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}
    pod = kube_http.patch(f"{PODS}/p", json=strategic, headers=STRATEGIC).json()
    assert [c["image"] for c in pod["spec"]["containers"]] == ["busybox:1.37"]
    ops = [
        {"op": "add", "path": "/metadata/annotations/x", "value": "y"},
        {"op": "test", "path": "/metadata/name", "value": "p"},
    ]
    assert kube_http.patch(f"{PODS}/p", json=ops, headers=JSONPATCH).json()["metadata"]["annotations"] == {"x": "y"}


def test_patch_errors(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    assert_status(
        kube_http.patch(f"{PODS}/missing", json={}, headers=MERGE), 404, "NotFound", 'pods "missing" not found'
    )
    failing = [{"op": "test", "path": "/metadata/name", "value": "other"}]
    assert_status(kube_http.patch(f"{PODS}/p", json=failing, headers=JSONPATCH), 422, "Invalid")
    assert_status(kube_http.patch(f"{PODS}/p", content=b"{bad", headers=MERGE), 400, "BadRequest")
    assert_status(kube_http.patch(f"{PODS}/p", json={"metadata": {"name": "q"}}, headers=MERGE), 400, "BadRequest")
    ssa = assert_status(  # server-side apply needs a field manager (test_apiserver_apply.py has the rest)
        kube_http.patch(f"{PODS}/p", content=b"{}", headers={"Content-Type": "application/apply-patch+yaml"}),
        422,
        "Invalid",
    )
    assert "fieldManager: Required value" in ssa["message"]
    assert_status(
        kube_http.patch(f"{PODS}/p", json={}, headers={"Content-Type": "text/plain"}), 415, "UnsupportedMediaType"
    )


def test_patch_with_resource_version_is_a_precondition(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    rv = pod["metadata"]["resourceVersion"]
    guarded = {"metadata": {"resourceVersion": rv, "annotations": {"allocated": "true"}}}
    assert kube_http.patch(f"{PODS}/p", json=guarded, headers=MERGE).status_code == 200
    assert_status(kube_http.patch(f"{PODS}/p", json=guarded, headers=MERGE), 409, "Conflict")


# delete -------------------------------------------------------------------------------------------


def test_delete_returns_the_pod_and_a_status_for_other_kinds(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    deleted = kube_http.delete(f"{PODS}/p").json()
    assert deleted["kind"] == "Pod"
    assert int(deleted["metadata"]["resourceVersion"]) > 0
    assert_status(kube_http.get(f"{PODS}/p"), 404, "NotFound")
    cm = create(kube_http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    status = kube_http.delete("/api/v1/namespaces/default/configmaps/c").json()
    assert status["status"] == "Success"
    assert status["details"] == {"name": "c", "kind": "configmaps", "uid": cm["metadata"]["uid"]}
    assert_status(kube_http.delete(f"{PODS}/p"), 404, "NotFound")


def test_delete_preconditions(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    wrong_uid = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "nope"}}
    body = assert_status(kube_http.request("DELETE", f"{PODS}/p", json=wrong_uid), 409, "Conflict")
    assert "Precondition failed: UID in precondition: nope" in body["message"]
    stale = {"preconditions": {"resourceVersion": "1"}}
    assert_status(kube_http.request("DELETE", f"{PODS}/p", json=stale), 409, "Conflict")
    right = {"preconditions": {"uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]}}
    assert kube_http.request("DELETE", f"{PODS}/p", json=right).status_code == 200


def test_finalizers_hold_the_object_until_removed(kube_http: httpx2.Client) -> None:
    pod = make_pod("p")
    pod["metadata"]["finalizers"] = ["example.com/hold"]  # type: ignore[index]
    create(kube_http, PODS, pod)
    marked = kube_http.delete(f"{PODS}/p").json()
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    again = kube_http.get(f"{PODS}/p").json()
    assert again["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    adding = {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}
    assert_status(kube_http.patch(f"{PODS}/p", json=adding, headers=MERGE), 422, "Invalid")
    kube_http.patch(f"{PODS}/p", json={"metadata": {"finalizers": None}}, headers=MERGE)
    assert_status(kube_http.get(f"{PODS}/p"), 404, "NotFound")


class Kubelet:
    def __init__(self, node: str) -> None:
        self.node = node

    def manages(self, node_name: str) -> bool:
        return node_name == self.node

    def container_log(self, namespace: str, name: str, container: str, previous: bool) -> ContainerLog | None:
        return None


def test_graceful_pod_deletion_waits_for_a_registered_kubelet(apiserver: ApiServer, kube_http: httpx2.Client) -> None:
    apiserver.add_kubelet_hook(Kubelet("n1"))
    create(kube_http, PODS, make_pod("on-n1", node="n1"))
    create(kube_http, PODS, make_pod("on-n2", node="n2"))
    marked = kube_http.request("DELETE", f"{PODS}/on-n1", json={"gracePeriodSeconds": 10}).json()
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 10
    assert kube_http.get(f"{PODS}/on-n1").status_code == 200
    kube_http.delete(f"{PODS}/on-n2")
    assert kube_http.get(f"{PODS}/on-n2").status_code == 404, "no kubelet manages n2: deleted at once"
    kube_http.delete(f"{PODS}/on-n1", params={"gracePeriodSeconds": "0"})
    assert kube_http.get(f"{PODS}/on-n1").status_code == 404


def test_namespace_deletion_cascades(kube_http: httpx2.Client) -> None:
    create(kube_http, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    create(kube_http, "/api/v1/namespaces/team/pods", make_pod("p", namespace="team"))
    create(kube_http, "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "c"}})
    kube_http.delete("/api/v1/namespaces/team")
    assert_status(kube_http.get("/api/v1/namespaces/team"), 404, "NotFound")
    assert kube_http.get("/api/v1/namespaces/team/pods").json()["items"] == []
    body = assert_status(kube_http.delete("/api/v1/namespaces/default"), 403, "Forbidden")
    assert "may not be deleted" in body["message"]


def test_terminating_namespace_refuses_new_content(kube_http: httpx2.Client) -> None:
    create(kube_http, "/api/v1/namespaces", {"metadata": {"name": "team"}})
    held = make_pod("held", namespace="team")
    held["metadata"]["finalizers"] = ["example.com/hold"]  # type: ignore[index]
    create(kube_http, "/api/v1/namespaces/team/pods", held)
    assert kube_http.delete("/api/v1/namespaces/team").json()["status"]["phase"] == "Terminating"
    refused = kube_http.post("/api/v1/namespaces/team/pods", json=make_pod("new", namespace="team"))
    assert "because it is being terminated" in assert_status(refused, 403, "Forbidden")["message"]
    kube_http.patch("/api/v1/namespaces/team/pods/held", json={"metadata": {"finalizers": None}}, headers=MERGE)
    assert_status(kube_http.get("/api/v1/namespaces/team"), 404, "NotFound")


def test_deletecollection_with_a_label_selector(kube_http: httpx2.Client) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        create(kube_http, PODS, make_pod(name, labels={"tier": tier}))
    deleted = kube_http.delete(PODS, params={"labelSelector": "tier=x"}).json()
    assert deleted["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in deleted["items"]) == ["a", "b"]
    assert [p["metadata"]["name"] for p in kube_http.get(PODS).json()["items"]] == ["c"]


# binding ------------------------------------------------------------------------------------------


def binding(pod: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": pod, "annotations": annotations or {}}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def test_binding_assigns_the_node(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p", annotations={"keep": "1"}))
    response = kube_http.post(f"{PODS}/p/binding", json=binding("p", "n1", {"assigned": "gpu0"}))
    assert response.status_code == 201
    assert response.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = kube_http.get(f"{PODS}/p").json()
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["annotations"] == {"keep": "1", "assigned": "gpu0"}
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled
    assert scheduled[0]["status"] == "True"


def test_binding_errors(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    assert_status(kube_http.post(f"{PODS}/p/binding", json=binding("q", "n1")), 400, "BadRequest")
    body = assert_status(kube_http.post(f"{PODS}/p/binding", json=binding("p", "")), 422, "Invalid")
    assert "target.name: Required value" in body["message"]
    assert_status(kube_http.post(f"{PODS}/nope/binding", json=binding("nope", "n1")), 404, "NotFound")
    kube_http.post(f"{PODS}/p/binding", json=binding("p", "n1"))
    body = assert_status(kube_http.post(f"{PODS}/p/binding", json=binding("p", "n2")), 409, "Conflict")
    assert (
        body["message"] == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
    )


def test_legacy_bindings_resource(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    assert kube_http.post("/api/v1/namespaces/default/bindings", json=binding("p", "n9")).status_code == 201
    assert kube_http.get(f"{PODS}/p").json()["spec"]["nodeName"] == "n9"


def test_create_with_a_resource_version_is_refused_like_kube_apiserver(kube_http: httpx2.Client) -> None:
    pod = create(kube_http, PODS, make_pod("p"))
    kube_http.delete(f"{PODS}/p")
    body = assert_status(kube_http.post(PODS, json=pod), 500, "InternalError")
    assert body["message"] == "resourceVersion should not be set on objects to be created"


def test_eviction_deletes_the_pod(kube_http: httpx2.Client) -> None:
    create(kube_http, PODS, make_pod("p"))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    response = kube_http.post(f"{PODS}/p/eviction", json=eviction)
    assert response.status_code == 201
    assert response.json()["status"] == "Success"
    assert_status(kube_http.get(f"{PODS}/p"), 404, "NotFound")
    assert_status(kube_http.post(f"{PODS}/p/eviction", json=eviction), 404, "NotFound")
    evictions = [r for r in kube_http.get("/api/v1").json()["resources"] if r["name"] == "pods/eviction"]
    assert evictions == [
        {
            "name": "pods/eviction",
            "singularName": "",
            "namespaced": True,
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        }
    ]
