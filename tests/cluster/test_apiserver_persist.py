"""SQLite state: a restart with the same state_dir resumes with the same objects (CRDs and their
objects included) and a resourceVersion counter that continues; older watches get 410."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.apiserver import http_client, make_node, make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.persist import FILE_NAME

PODS = "/api/v1/namespaces/default/pods"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Cluster",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}


def test_restart_resumes_objects_and_the_resource_version(tmp_path: Path) -> None:
    with ApiServer(state_dir=tmp_path) as first, http_client(first.url) as http:
        http.post("/api/v1/nodes", json=make_node("n1"))
        http.post(PODS, json=make_pod("keep", labels={"a": "b"}))
        http.post(PODS, json=make_pod("drop"))
        http.delete(f"{PODS}/drop")
        http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD)
        http.post(
            "/apis/example.com/v1/widgets",
            json={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
        )
        before = http.get(f"{PODS}/keep").json()
        last_rv = int(http.get("/api/v1/namespaces").json()["metadata"]["resourceVersion"])
        first_port = first.port
    assert (tmp_path / FILE_NAME).exists()

    with ApiServer(state_dir=tmp_path) as second, http_client(second.url) as http:
        assert http.get(f"{PODS}/keep").json() == before
        assert http.get(f"{PODS}/drop").status_code == 404
        assert http.get("/api/v1/nodes/n1").status_code == 200
        assert http.get("/apis/example.com/v1/widgets/w").json()["metadata"]["name"] == "w"
        moved = (
            3 if second.port != first_port else 0
        )  # the `kubernetes` Service, Endpoints and EndpointSlice name the new port
        assert int(http.get(PODS).json()["metadata"]["resourceVersion"]) == last_rv + moved
        created = http.post(PODS, json=make_pod("after")).json()
        assert int(created["metadata"]["resourceVersion"]) == last_rv + moved + 1
        namespaces = [n["metadata"]["name"] for n in http.get("/api/v1/namespaces").json()["items"]]
        assert namespaces == ["default", "kube-node-lease", "kube-public", "kube-system"]
        with http.stream("GET", PODS, params={"watch": "1", "resourceVersion": str(last_rv - 1)}) as response:
            error = json.loads(next(line for line in response.iter_lines() if line.strip()))
        assert error["type"] == "ERROR"
        assert error["object"]["code"] == 410
        with http.stream("GET", PODS, params={"watch": "1", "resourceVersion": str(last_rv)}) as response:
            event = json.loads(next(line for line in response.iter_lines() if line.strip()))
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after")
