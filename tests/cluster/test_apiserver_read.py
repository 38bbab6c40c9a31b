"""Read paths over HTTP: discovery, health, selectors, paging with continue tokens, consistent
snapshots, server-side tables, the events.k8s.io view, CRDs and the Volcano kinds."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import http_client, make_node, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol

PODS = "/api/v1/namespaces/default/pods"
TABLE = {
    "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
}
PROTOCOL = KitProtocol.default()


def post(http: httpx2.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=obj)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


# discovery ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("slash", ["", "/"])
def test_discovery_with_and_without_trailing_slash(kube_http: httpx2.Client, slash: str) -> None:
    assert kube_http.get(f"/version{slash}").json()["gitVersion"] == "v1.31.0"
    assert kube_http.get(f"/api{slash}").json()["versions"] == ["v1"]
    core = kube_http.get(f"/api/v1{slash}").json()
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods == {
        "name": "pods",
        "singularName": "pod",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
    }
    assert {"pods/status", "pods/binding", "nodes/status", "namespaces"} <= {r["name"] for r in core["resources"]}
    groups = {g["name"]: g for g in kube_http.get(f"/apis{slash}").json()["groups"]}
    assert groups["scheduling.volcano.sh"]["preferredVersion"]["version"] == "v1beta1"
    assert {"apps", "batch", "coordination.k8s.io", "apiextensions.k8s.io", "rbac.authorization.k8s.io"} <= set(groups)
    assert kube_http.get(f"/apis/apps{slash}").json()["kind"] == "APIGroup"
    volcano = kube_http.get(f"/apis/scheduling.volcano.sh/v1beta1{slash}").json()["resources"]
    assert {(r["name"], r["namespaced"], tuple(r.get("shortNames", ()))) for r in volcano if "/" not in r["name"]} == {
        ("podgroups", True, ("pg", "podgroup-v1beta1")),
        ("queues", False, ("q", "queue-v1beta1")),
    }
    assert "queues/status" in {r["name"] for r in volcano}


def test_health(kube_http: httpx2.Client) -> None:  # OpenAPI: test_apiserver_openapi_docs.py
    for path in ("/healthz", "/readyz", "/livez", "/readyz/ping"):
        assert kube_http.get(path).text == "ok"
    assert kube_http.get("/apis/nope/v1").status_code == 404


def test_configurable_version() -> None:
    with ApiServer(kubernetes_version="1.29.4") as server:
        body = http_client(server.url).get("/version").json()
    assert (body["major"], body["minor"], body["gitVersion"]) == ("1", "29", "v1.29.4")


def test_system_namespaces_exist(kube_http: httpx2.Client) -> None:
    listed = kube_http.get("/api/v1/namespaces").json()
    assert names(listed) == ["default", "kube-node-lease", "kube-public", "kube-system"]
    assert listed["items"][0]["status"]["phase"] == "Active"


# selectors ----------------------------------------------------------------------------------------


def seed_pods(http: httpx2.Client) -> None:
    post(http, "/api/v1/namespaces", {"metadata": {"name": "other"}})
    for name, node, tier in (("a", "n1", "web"), ("b", "n1", "db"), ("c", "n2", "web"), ("d", None, "web")):
        post(http, PODS, make_pod(name, node=node, labels={"tier": tier}, scheduler="lj" if node is None else None))
    post(http, "/api/v1/namespaces/other/pods", make_pod("e", namespace="other", node="n1", labels={"tier": "web"}))
    http.patch(
        f"{PODS}/b/status",
        json={"status": {"phase": "Succeeded"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )


@pytest.mark.parametrize(
    ("path", "params", "expected"),
    [
        ("/api/v1/pods", {}, ["a", "b", "c", "d", "e"]),
        (PODS, {}, ["a", "b", "c", "d"]),
        (PODS, {"labelSelector": "tier=web"}, ["a", "c", "d"]),
        (PODS, {"labelSelector": "tier in (db),tier!=web"}, ["b"]),
        (PODS, {"labelSelector": "!tier"}, []),
        ("/api/v1/pods", {"fieldSelector": "spec.nodeName=n1"}, ["a", "b", "e"]),
        (
            "/api/v1/pods",
            {"fieldSelector": "spec.nodeName=n1,status.phase!=Failed,status.phase!=Succeeded"},
            ["a", "e"],
        ),
        ("/api/v1/pods", {"fieldSelector": "spec.nodeName="}, ["d"]),
        ("/api/v1/pods", {"fieldSelector": "metadata.namespace=other"}, ["e"]),
        (PODS, {"fieldSelector": "metadata.name!=a", "labelSelector": "tier=web"}, ["c", "d"]),
        (PODS, {"fieldSelector": "spec.schedulerName=lj"}, ["d"]),
        (PODS, {"fieldSelector": "status.phase=Pending"}, ["a", "c", "d"]),
    ],
)
def test_list_selectors(kube_http: httpx2.Client, path: str, params: dict[str, str], expected: list[str]) -> None:
    seed_pods(kube_http)
    assert names(kube_http.get(path, params=params).json()) == expected


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"labelSelector": "tier in web"}, "unable to parse requirement"),
        ({"fieldSelector": "spec.foo=bar"}, "field label not supported: spec.foo"),
        ({"fieldSelector": "spec.nodeName"}, "invalid selector"),
        ({"limit": "ten"}, "invalid integer value for limit"),
        ({"continue": "garbage"}, "continue key is not valid"),
        ({"watch": "maybe"}, "invalid boolean value for watch"),
    ],
)
def test_bad_list_parameters(kube_http: httpx2.Client, params: dict[str, str], fragment: str) -> None:
    response = kube_http.get(PODS, params=params)
    assert response.status_code == 400
    assert response.json()["reason"] == "BadRequest"
    assert fragment in response.json()["message"]


def test_event_field_selectors_as_describe_uses_them(kube_http: httpx2.Client) -> None:
    node = post(kube_http, "/api/v1/nodes", make_node("n1"))
    involved = {"kind": "Node", "name": "n1", "uid": node["metadata"]["uid"]}
    post(
        kube_http,
        "/api/v1/namespaces/default/events",
        {"metadata": {"name": "e1"}, "involvedObject": involved, "reason": "Up"},
    )
    post(
        kube_http,
        "/api/v1/namespaces/default/events",
        {"metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "x"}},
    )
    uid = node["metadata"]["uid"]
    selector = f"involvedObject.kind=Node,involvedObject.name=n1,involvedObject.uid={uid},involvedObject.namespace="
    assert names(kube_http.get("/api/v1/events", params={"fieldSelector": selector}).json()) == ["e1"]
    assert names(kube_http.get("/api/v1/events", params={"fieldSelector": "reason=Up"}).json()) == ["e1"]


# paging -------------------------------------------------------------------------------------------


def test_limit_and_continue_visit_every_item_once(kube_http: httpx2.Client) -> None:
    expected = [f"p{i:02d}" for i in range(23)]
    for name in reversed(expected):
        post(kube_http, PODS, make_pod(name))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        params = {"limit": "5", **({"continue": token} if token else {})}
        body = kube_http.get(PODS, params=params).json()
        seen += names(body)
        pages += 1
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert seen == expected
    assert pages == 5


def test_continue_serves_a_consistent_snapshot(kube_http: httpx2.Client) -> None:
    for name in ("a", "b", "c", "d"):
        post(kube_http, PODS, make_pod(name, labels={"v": "1"}))
    first = kube_http.get(PODS, params={"limit": "2"}).json()
    assert names(first) == ["a", "b"]
    kube_http.delete(f"{PODS}/c")
    post(kube_http, PODS, make_pod("cc"))
    kube_http.patch(
        f"{PODS}/d", json={"metadata": {"labels": {"v": "2"}}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    rest = kube_http.get(PODS, params={"limit": "10", "continue": first["metadata"]["continue"]}).json()
    assert names(rest) == ["c", "d"]
    assert rest["items"][1]["metadata"]["labels"] == {"v": "1"}
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert names(kube_http.get(PODS).json()) == ["a", "b", "cc", "d"]


def test_expired_continue_token_is_410() -> None:
    with ApiServer(history_size=5) as server, http_client(server.url) as http:
        for i in range(3):
            post(http, PODS, make_pod(f"p{i}"))
        token = http.get(PODS, params={"limit": "1"}).json()["metadata"]["continue"]
        for i in range(6):
            post(http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"c{i}"}})
        response = http.get(PODS, params={"limit": "1", "continue": token})
    assert response.status_code == 410
    assert response.json()["reason"] == "Expired"
    assert "continue parameter is too old" in response.json()["message"]


def test_list_at_an_exact_resource_version(kube_http: httpx2.Client) -> None:
    post(kube_http, PODS, make_pod("a"))
    rv = kube_http.get(PODS).json()["metadata"]["resourceVersion"]
    post(kube_http, PODS, make_pod("b"))
    kube_http.delete(f"{PODS}/a")
    old = kube_http.get(PODS, params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}).json()
    assert names(old) == ["a"]
    assert old["metadata"]["resourceVersion"] == rv
    assert names(
        kube_http.get(PODS, params={"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}).json()
    ) == ["b"]


# tables -------------------------------------------------------------------------------------------


def gpu_node(name: str, count: int = 2) -> dict[str, Any]:
    inventory = NodeInventory.simulated(name, "A100-80GB", count)
    return make_node(
        name,
        labels={"node-role.kubernetes.io/worker": ""},
        annotations={PROTOCOL.annotations.node_devices: inventory.to_annotation()},
    )


def assigned_pod(name: str, node: str, milli: int, index: int = 0) -> dict[str, Any]:
    share = GpuShare(GpuUUID(f"GPU-{index}"), index, milli, 1024)
    assignment = Assignment(NodeName(node), {"main": (share,)}, "fgd")
    # the share the pod asks for: an assignment unequal to the requests shows as <refused>
    limits = {PROTOCOL.resources.core: str(milli // 10)}
    annotations = {PROTOCOL.annotations.assignment: assignment.to_annotation()}
    return make_pod(name, node=node, limits=limits, annotations=annotations)


def table(http: httpx2.Client, path: str, **params: str) -> dict[str, Any]:
    body: dict[str, Any] = http.get(path, headers=TABLE, params=params).json()
    assert body["kind"] == "Table"
    assert body["apiVersion"] == "meta.k8s.io/v1"
    return body


def column(body: dict[str, Any], name: str) -> list[Any]:
    at = [c["name"] for c in body["columnDefinitions"]].index(name)
    return [row["cells"][at] for row in body["rows"]]


def test_node_table_shows_gpus_and_allocation(kube_http: httpx2.Client) -> None:
    post(kube_http, "/api/v1/nodes", gpu_node("n1"))
    post(kube_http, "/api/v1/nodes", make_node("plain"))
    post(kube_http, PODS, assigned_pod("a", "n1", 500))
    post(kube_http, PODS, assigned_pod("b", "n1", 1000, index=1))
    post(kube_http, PODS, assigned_pod("done", "n1", 500))
    kube_http.patch(
        f"{PODS}/done/status",
        json={"status": {"phase": "Succeeded"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    body = table(kube_http, "/api/v1/nodes")
    assert [c["name"] for c in body["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
        "GPUs",
        "GPU Allocated",
    ]
    assert column(body, "Name") == ["n1", "plain"]
    assert column(body, "Status") == ["Ready", "Ready"]
    assert column(body, "Roles") == ["worker", "<none>"]
    assert column(body, "GPUs") == ["2x A100-80GB", "<none>"]
    assert column(body, "GPU Allocated") == ["75%", "<none>"]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert body["rows"][0]["object"]["metadata"]["name"] == "n1"


def test_pod_table_columns(kube_http: httpx2.Client) -> None:
    post(kube_http, PODS, assigned_pod("assigned", "n1", 500))
    post(kube_http, PODS, make_pod("asking", limits={PROTOCOL.resources.core: "30", PROTOCOL.resources.memory: "4"}))
    post(kube_http, PODS, make_pod("whole", limits={PROTOCOL.resources.gpu: "2"}))
    post(kube_http, PODS, make_pod("cpu"))
    body = table(kube_http, PODS)
    assert [c["name"] for c in body["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "GPU",
    ]
    assert column(body, "Name") == ["asking", "assigned", "cpu", "whole"]
    assert column(body, "GPU") == ["30% (requested)", "GPU0:50%", "<none>", "2 GPUs (requested)"]
    assert column(body, "Ready") == ["0/1"] * 4
    assert column(body, "Status") == ["Pending"] * 4
    assert column(body, "Node") == ["<none>", "n1", "<none>", "<none>"]
    assert all(age.endswith("s") for age in column(body, "Age"))


def test_table_include_object_and_single_get(kube_http: httpx2.Client) -> None:
    post(kube_http, PODS, make_pod("p"))
    none = table(kube_http, PODS, includeObject="None")
    assert "object" not in none["rows"][0]
    full = table(kube_http, PODS, includeObject="Object")
    assert full["rows"][0]["object"]["spec"]["containers"][0]["name"] == "main"
    one = table(kube_http, f"{PODS}/p")
    assert len(one["rows"]) == 1
    assert one["rows"][0]["cells"][0] == "p"
    cms = table(kube_http, "/api/v1/namespaces")
    assert [c["name"] for c in cms["columnDefinitions"]] == ["Name", "Status", "Age"]


def test_partial_object_metadata_list(kube_http: httpx2.Client) -> None:
    post(kube_http, PODS, make_pod("p", labels={"a": "b"}))
    accept = {"Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"}
    body = kube_http.get(PODS, headers=accept).json()
    assert body["kind"] == "PartialObjectMetadataList"
    assert body["items"][0]["metadata"]["labels"] == {"a": "b"}
    assert "spec" not in body["items"][0]


def test_unacceptable_accept_header(kube_http: httpx2.Client) -> None:
    response = kube_http.get(PODS, headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert response.status_code == 406


# kinds served as views, CRDs and the Volcano kinds -------------------------------------------------


def test_events_k8s_io_is_a_view_of_core_events(kube_http: httpx2.Client) -> None:
    core = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "message": "hello",
        "reason": "R",
    }
    post(kube_http, "/api/v1/namespaces/default/events", core)
    v1 = kube_http.get("/apis/events.k8s.io/v1/namespaces/default/events/e1").json()
    assert (v1["apiVersion"], v1["note"], v1["regarding"]["name"]) == ("events.k8s.io/v1", "hello", "p")
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e2"},
        "note": "n",
        "regarding": {"kind": "Node", "name": "x"},
    }
    post(kube_http, "/apis/events.k8s.io/v1/namespaces/default/events", new)
    back = kube_http.get("/api/v1/namespaces/default/events/e2").json()
    assert (back["apiVersion"], back["message"], back["involvedObject"]["name"]) == ("v1", "n", "x")
    listed = kube_http.get("/apis/events.k8s.io/v1/events", params={"fieldSelector": "regarding.kind=Node"}).json()
    assert names(listed) == ["e2"]
    assert listed["kind"] == "EventList"
    assert listed["items"][0]["note"] == "n"


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
            },
            {"name": "v1beta1", "served": True, "storage": False},
        ],
    },
}


def test_crd_registers_and_unregisters_a_resource(kube_http: httpx2.Client) -> None:
    crd = post(kube_http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert established == {"NamesAccepted": "True", "Established": "True"}
    group = next(g for g in kube_http.get("/apis").json()["groups"] if g["name"] == "example.com")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    widgets = "/apis/example.com/v1/namespaces/default/widgets"
    widget = post(
        kube_http,
        widgets,
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}},
    )
    assert widget["metadata"]["generation"] == 1
    old = kube_http.get("/apis/example.com/v1beta1/namespaces/default/widgets/w").json()
    assert old["apiVersion"] == "example.com/v1beta1"
    assert old["spec"] == {"size": 3}
    rows = table(kube_http, widgets)
    assert [c["name"] for c in rows["columnDefinitions"]] == ["Name", "Size"]
    assert rows["rows"][0]["cells"] == ["w", 3]
    strategic = kube_http.patch(
        f"{widgets}/w", json={}, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert strategic.status_code == 415
    merged = kube_http.patch(
        f"{widgets}/w", json={"spec": {"size": 4}}, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert merged.json()["metadata"]["generation"] == 2
    kube_http.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert kube_http.get(widgets).status_code == 404
    assert all(g["name"] != "example.com" for g in kube_http.get("/apis").json()["groups"])
    post(kube_http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert kube_http.get(widgets).json()["items"] == [], "objects went with their CRD"


def test_invalid_crd(kube_http: httpx2.Client) -> None:
    bad = json.loads(json.dumps(CRD))
    bad["metadata"]["name"] = "wrong.example.com"
    bad["spec"]["versions"][1]["storage"] = True
    response = kube_http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=bad)
    assert response.status_code == 422
    fields = {c["field"] for c in response.json()["details"]["causes"]}
    assert fields == {"metadata.name", "spec.versions"}


def test_volcano_podgroups_and_queues(kube_http: httpx2.Client) -> None:
    queue = post(
        kube_http,
        "/apis/scheduling.volcano.sh/v1beta1/queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q1"},
            "spec": {"weight": 1},
            "status": {"state": "Open"},
        },
    )
    assert "status" not in queue, "queues have a status subresource"
    status = {**queue, "status": {"state": "Open"}}
    assert kube_http.put("/apis/scheduling.volcano.sh/v1beta1/queues/q1/status", json=status).json()["status"] == {
        "state": "Open"
    }
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg1"},
        "spec": {"minMember": 2, "queue": "q1"},
        "status": {"phase": "Pending"},
    }
    created = post(kube_http, "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", group)
    assert "status" not in created, "podgroups have a status subresource (the scheduler writes it)"
    path = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/pg1/status"
    assert kube_http.put(path, json={**created, "status": {"phase": "Pending"}}).status_code == 200
    rows = table(kube_http, "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups")
    assert column(rows, "STATUS") == ["Pending"]
    assert column(rows, "minMember") == [2]
    assert column(rows, "QUEUE") == ["q1"]
