"""The garbage collector against the embedded API server: background, foreground and orphan
propagation as kube documents them (Garbage Collection; Use Cascading Deletion), dangling owners,
dependents with a live owner left, and what `kubectl delete --cascade` does."""

from __future__ import annotations

from typing import Any

from fixtures.apiserver import Kubectl
from fixtures.controllers import NS, PODS, Workloads, set_ready, template
from runtimekit.kube.errors import KubeError

DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
RS = f"/apis/apps/v1/namespaces/{NS}/replicasets"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


def exists(w: Workloads, path: str) -> bool:
    try:
        w.http.get(path)
    except KubeError as exc:
        if exc.code == 404:
            return False
        raise
    return True


def replicaset(name: str, replicas: int, on_node: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template(name, on_node)},
    }


def configmap(name: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": owners}}


def ref(obj: dict[str, Any], kind: str, api_version: str = "v1", block: bool = False) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "blockOwnerDeletion": block,
    }


def test_background_deletion_takes_the_dependents_after_the_owner(workloads: Workloads) -> None:
    workloads.http.post(RS, replicaset("web", 2))
    workloads.wait(lambda: len(workloads.pods("app=web")) == 2, "two pods")
    workloads.http.delete(f"{RS}/web", {"propagationPolicy": "Background"})
    assert not exists(workloads, f"{RS}/web")  # the owner goes at once
    workloads.wait(lambda: not workloads.pods("app=web"), "the pods collected")


def test_foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone(workloads: Workloads) -> None:
    held = replicaset("web", 1, on_node=False)
    held["spec"]["template"]["metadata"]["finalizers"] = ["example.com/hold"]
    workloads.http.post(RS, held)
    [pod] = workloads.wait(lambda: workloads.pods("app=web"), "a pod")
    workloads.http.delete(f"{RS}/web", {"propagationPolicy": "Foreground"})
    workloads.wait(
        lambda: workloads.http.get(f"{PODS}/{pod['metadata']['name']}")["metadata"].get("deletionTimestamp"),
        "the pod deleted",
    )
    owner = workloads.http.get(f"{RS}/web")
    assert owner["metadata"]["deletionTimestamp"]
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    workloads.http.patch(f"{PODS}/{pod['metadata']['name']}", {"metadata": {"finalizers": None}}, "merge")
    workloads.wait(lambda: not exists(workloads, f"{RS}/web"), "the owner gone once its pod is")


def test_foreground_goes_down_a_chain_of_owners(workloads: Workloads) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")},
    }
    workloads.http.post(DEPLOY, body)
    workloads.wait(lambda: len(workloads.pods("app=web")) == 2, "two pods")
    workloads.http.delete(f"{DEPLOY}/web", {"propagationPolicy": "Foreground"})
    workloads.wait(lambda: not exists(workloads, f"{DEPLOY}/web"), "the deployment gone")
    assert not workloads.pods("app=web")  # foreground: the pods went before their owners
    assert not workloads.http.list(RS)[0]


def test_orphan_deletion_leaves_the_dependents_without_the_owner(workloads: Workloads) -> None:
    created = workloads.http.post(RS, replicaset("web", 2, on_node=False))
    pods = workloads.wait(lambda: len(workloads.pods("app=web")) == 2 and workloads.pods("app=web"), "two pods")
    for pod in pods:
        set_ready(workloads.http, pod)
    workloads.http.delete(f"{RS}/web", {"propagationPolicy": "Orphan"})
    workloads.wait(lambda: not exists(workloads, f"{RS}/web"), "the owner gone")
    left = workloads.pods("app=web")
    assert sorted(p["metadata"]["uid"] for p in left) == sorted(p["metadata"]["uid"] for p in pods)
    assert all("ownerReferences" not in p["metadata"] for p in left)  # kube omits it, never `[]`
    assert all(created["metadata"]["uid"] not in str(p) for p in left)


def test_a_dependent_with_a_live_owner_only_loses_the_dead_one(workloads: Workloads) -> None:
    first = workloads.http.post(CONFIGMAPS, configmap("first", []))
    second = workloads.http.post(CONFIGMAPS, configmap("second", []))
    workloads.http.post(CONFIGMAPS, configmap("shared", [ref(first, "ConfigMap"), ref(second, "ConfigMap")]))
    workloads.http.delete(f"{CONFIGMAPS}/first")

    def pruned() -> bool:
        owners = workloads.http.get(f"{CONFIGMAPS}/shared")["metadata"].get("ownerReferences") or []
        return [o["name"] for o in owners] == ["second"]

    workloads.wait(pruned, "the dead owner dropped")
    workloads.http.delete(f"{CONFIGMAPS}/second")
    workloads.wait(lambda: not exists(workloads, f"{CONFIGMAPS}/shared"), "collected with its last owner")


def test_an_owner_that_never_existed_is_dangling(workloads: Workloads) -> None:
    ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-4000-8000-000000000000"}}
    workloads.http.post(CONFIGMAPS, configmap("haunted", [ref(ghost, "ConfigMap")]))
    workloads.wait(lambda: not exists(workloads, f"{CONFIGMAPS}/haunted"), "collected")


def test_an_owner_of_a_kind_found_through_discovery(workloads: Workloads) -> None:
    """Leases are not in the collector's graph: the owner is looked up on the API server."""
    lease = workloads.http.post(
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "holder"}},
    )
    workloads.http.post(CONFIGMAPS, configmap("kept", [ref(lease, "Lease", "coordination.k8s.io/v1")]))
    workloads.http.post(CONFIGMAPS, configmap("marker", [ref({"metadata": {"name": "x", "uid": "u-1"}}, "ConfigMap")]))
    workloads.wait(lambda: not exists(workloads, f"{CONFIGMAPS}/marker"), "the collector at work")
    assert exists(workloads, f"{CONFIGMAPS}/kept")


def test_kubectl_delete_cascade_modes(workloads: Workloads, kubectl: Kubectl) -> None:
    workloads.http.post(RS, replicaset("web", 1))
    workloads.wait(lambda: workloads.pods("app=web"), "a pod")
    kubectl("delete", "rs/web", "--cascade=orphan")
    [pod] = workloads.pods("app=web")
    assert "ownerReferences" not in pod["metadata"]
    workloads.http.post(RS, replicaset("web", 1))  # adopts the orphan (and deletes any pod too many)

    def one_owned() -> bool:
        pods = workloads.pods("app=web")
        return len(pods) == 1 and bool(pods[0]["metadata"].get("ownerReferences"))

    workloads.wait(one_owned, "one pod, adopted")
    kubectl("delete", "rs/web", "--cascade=foreground", "--timeout=60s")
    assert not workloads.pods("app=web")
