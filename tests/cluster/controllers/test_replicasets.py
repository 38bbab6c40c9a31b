"""The ReplicaSet controller against the embedded API server: pods from the template, status counts,
replacement, the order pods go in on scale-down, adoption and release by selector."""

from __future__ import annotations

from typing import Any

from fixtures.controllers import NS, PODS, Workloads, set_ready, template
from runtimekit.cluster.controllers.pods import deletion_order

RS = f"/apis/apps/v1/namespaces/{NS}/replicasets"


def replicaset(name: str, replicas: int, on_node: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, on_node),
            **spec,
        },
    }


def status(w: Workloads, name: str) -> dict[str, Any]:
    result: dict[str, Any] = w.http.get(f"{RS}/{name}").get("status") or {}
    return result


def test_pods_come_from_the_template_and_the_status_counts_them(workloads: Workloads) -> None:
    created = workloads.http.post(RS, replicaset("web", 3))
    workloads.wait(lambda: status(workloads, "web").get("availableReplicas") == 3, "3 available")
    got = status(workloads, "web")
    assert got == {
        "replicas": 3,
        "fullyLabeledReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "observedGeneration": 1,
    }
    pods = workloads.pods("app=web")
    assert len(pods) == 3
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith("web-")
        assert meta["labels"] == {"app": "web"}
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("ReplicaSet", "web", created["metadata"]["uid"])
        assert owner["controller"]
        assert owner["blockOwnerDeletion"]
    messages = sorted(e["message"] for e in workloads.events("web", "SuccessfulCreate"))
    assert messages == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)


def test_a_deleted_or_failed_pod_is_replaced(workloads: Workloads) -> None:
    workloads.http.post(RS, replicaset("web", 2, on_node=False))
    first = workloads.wait(lambda: len(workloads.pods("app=web")) == 2 and workloads.pods("app=web"), "two pods")
    workloads.http.delete(f"{PODS}/{first[0]['metadata']['name']}")
    failed = first[1]
    workloads.http.patch(f"{PODS}/{failed['metadata']['name']}/status", {"status": {"phase": "Failed"}}, "merge")

    def replaced() -> bool:
        active = [p for p in workloads.pods("app=web") if p["status"].get("phase") == "Pending"]
        names = {p["metadata"]["name"] for p in active}
        return len(active) == 2 and not names & {first[0]["metadata"]["name"], failed["metadata"]["name"]}

    workloads.wait(replaced, "two new pods")
    assert status(workloads, "web")["replicas"] == 2  # the Failed pod is not counted


def test_scale_down_deletes_unready_pods_first(workloads: Workloads) -> None:
    workloads.http.post(RS, replicaset("web", 4, on_node=False))
    pods = workloads.wait(lambda: len(workloads.pods("app=web")) == 4 and workloads.pods("app=web"), "four pods")
    ready = {p["metadata"]["name"] for p in pods[:2]}
    for pod in pods[:2]:
        set_ready(workloads.http, pod)
    workloads.wait(lambda: status(workloads, "web").get("readyReplicas") == 2, "two ready")
    workloads.http.patch(f"{RS}/web/scale", {"spec": {"replicas": 2}}, "merge")
    workloads.wait(lambda: len(workloads.pods("app=web")) == 2, "two left")
    assert {p["metadata"]["name"] for p in workloads.pods("app=web")} == ready
    workloads.wait(lambda: status(workloads, "web").get("replicas") == 2, "status of two")
    assert len(workloads.events("web", "SuccessfulDelete")) == 2


def pod(
    name: str, phase: str = "Running", ready: bool = True, node: str = "n1", created: str = "", since: str = ""
) -> dict[str, Any]:
    conditions = (
        [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": since}] if since else []
    )
    return {
        "metadata": {"name": name, "creationTimestamp": created or "2024-01-01T00:00:00Z"},
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": conditions or [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_deletion_order_follows_kube() -> None:
    pods = [
        pod("ready-old", since="2024-01-01T00:00:00Z"),
        pod("ready-recent", since="2024-01-01T01:00:00Z"),
        pod("unready", ready=False),
        pod("pending", phase="Pending", ready=False),
        pod("unscheduled", phase="Pending", ready=False, node=""),
        pod("doubled", node="n2", since="2024-01-01T00:00:00Z"),
        pod("doubled-too", node="n2", since="2024-01-01T00:00:00Z", created="2024-01-01T00:30:00Z"),
    ]
    order = [p["metadata"]["name"] for p in deletion_order(pods)]
    assert order[:3] == ["unscheduled", "pending", "unready"]
    # among the ready ones, pods of the node with more of the set (n1: 4, n2: 2) go first, the newest ready first
    assert order[3:5] == ["ready-recent", "ready-old"]
    assert order[5:] == ["doubled-too", "doubled"]


def test_orphans_are_adopted_and_pods_that_stop_matching_are_released(workloads: Workloads) -> None:
    orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stray", "labels": {"app": "web"}}}
    orphan["spec"] = {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "node-1"}
    workloads.http.post(PODS, orphan)
    # its pods stay unscheduled, so should the set make two before it adopts the stray one (informers
    # race), one of those goes, never the stray pod: unscheduled pods are deleted first
    created = workloads.http.post(RS, replicaset("web", 2, on_node=False))
    workloads.wait(lambda: len(workloads.pods("app=web")) == 2, "two pods")

    def adopted() -> bool:
        refs = workloads.http.get(f"{PODS}/stray")["metadata"].get("ownerReferences") or []
        return [r["uid"] for r in refs] == [created["metadata"]["uid"]]

    workloads.wait(adopted, "the stray pod adopted")
    workloads.http.patch(f"{PODS}/stray", {"metadata": {"labels": {"app": "other"}}}, "merge")
    workloads.wait(lambda: not workloads.http.get(f"{PODS}/stray")["metadata"].get("ownerReferences"), "released")
    workloads.wait(lambda: len(workloads.pods("app=web")) == 2, "a replacement")
