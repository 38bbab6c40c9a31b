"""The Deployment controller against the embedded API server: the new ReplicaSet and its hash, the
revision annotations, rolling updates within maxSurge/maxUnavailable, Recreate, scaling, pausing,
the revision history limit, the progress deadline, and what `kubectl rollout` reads."""

from __future__ import annotations

from typing import Any

from fixtures.apiserver import Kubectl
from fixtures.controllers import NS, PODS, Workloads, set_ready, template
from runtimekit.cluster.controllers import rollout

DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
RS = f"/apis/apps/v1/namespaces/{NS}/replicasets"


def deployment(name: str, replicas: int, on_node: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, on_node),
            **spec,
        },
    }


def get(w: Workloads, name: str) -> dict[str, Any]:
    result: dict[str, Any] = w.http.get(f"{DEPLOY}/{name}")
    return result


def sets(w: Workloads, name: str) -> list[dict[str, Any]]:
    return sorted(
        w.http.list(RS, {"labelSelector": f"app={name}"})[0], key=lambda r: r["metadata"]["creationTimestamp"]
    )


def rolled_out(w: Workloads, name: str) -> dict[str, Any] | None:
    d = get(w, name)
    status = d.get("status") or {}
    done = status.get("observedGeneration") == d["metadata"]["generation"] and rollout.is_complete(d, status)
    return d if done else None


def new_image(w: Workloads, name: str, image: str) -> None:
    containers = [{"name": "c", "image": image}]
    w.http.patch(f"{DEPLOY}/{name}", {"spec": {"template": {"spec": {"containers": containers}}}}, "strategic")


def test_a_deployment_makes_a_hashed_replica_set_and_reports_its_rollout(workloads: Workloads) -> None:
    created = workloads.http.post(DEPLOY, deployment("web", 3))
    d = workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out")
    [rs] = sets(workloads, "web")
    digest = rs["metadata"]["labels"][rollout.HASH_LABEL]
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", rollout.HASH_LABEL: digest}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", rollout.HASH_LABEL: digest}
    assert rs["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    annotations = rs["metadata"]["annotations"]
    assert (annotations[rollout.REVISION], annotations[rollout.DESIRED], annotations[rollout.MAX_REPLICAS]) == (
        "1",
        "3",
        "4",
    )
    assert d["metadata"]["annotations"][rollout.REVISION] == "1"
    assert all(p["metadata"]["labels"][rollout.HASH_LABEL] == digest for p in workloads.pods("app=web"))
    status = d["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"]) == (
        3,
        3,
        3,
        3,
    )
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    [event] = workloads.events("web", "ScalingReplicaSet")
    assert event["message"] == f"Scaled up replica set web-{digest} from 0 to 3"


def _ready_pods(w: Workloads) -> int:
    pods = [p for p in w.pods("app=web") if not p["metadata"].get("deletionTimestamp")]
    ready = [
        p
        for p in pods
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    ]
    return len(ready)


def _drive(w: Workloads, replicas: int, surge: int, unavailable: int | None) -> int:
    """Play kubelet, one pod at a time, checking the rollout's bounds at every step; returns the steps."""
    steps = 0
    while not rolled_out(w, "web"):
        total = sum(r["spec"]["replicas"] for r in sets(w, "web"))
        assert total <= replicas + surge, f"{total} pods wanted, more than {replicas} + {surge}"
        if unavailable is not None:
            assert _ready_pods(w) >= replicas - unavailable
        waiting = [p for p in w.pods("app=web") if p["status"].get("phase") == "Pending"]
        if waiting:
            set_ready(w.http, waiting[0])
            steps += 1
        w.wait(
            lambda: rolled_out(w, "web") or [p for p in w.pods("app=web") if p["status"].get("phase") == "Pending"],
            "a step",
        )
    return steps


def test_a_rolling_update_stays_within_max_surge_and_max_unavailable(workloads: Workloads) -> None:
    workloads.http.post(DEPLOY, deployment("web", 4, on_node=False))  # defaults: 25% surge, 25% unavailable
    assert _drive(workloads, 4, surge=1, unavailable=None) == 4
    [old] = sets(workloads, "web")
    new_image(workloads, "web", "nginx:1.26")
    assert _drive(workloads, 4, surge=1, unavailable=1) == 4
    d = rolled_out(workloads, "web")
    assert d is not None
    current, previous = (
        r for r in sorted(sets(workloads, "web"), key=lambda r: r["metadata"]["name"] == old["metadata"]["name"])
    )
    assert (current["spec"]["replicas"], previous["spec"]["replicas"]) == (4, 0)
    assert current["metadata"]["annotations"][rollout.REVISION] == "2"
    assert d["metadata"]["annotations"][rollout.REVISION] == "2"
    assert d["status"]["observedGeneration"] == 2
    pods = workloads.pods("app=web")
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:1.26"}
    messages = [e["message"] for e in workloads.events("web", "ScalingReplicaSet")]
    assert f"Scaled up replica set {current['metadata']['name']} from 0 to 1" in messages
    assert f"Scaled down replica set {old['metadata']['name']} from 1 to 0" in messages


def test_scaling_resizes_the_current_replica_set(workloads: Workloads) -> None:
    workloads.http.post(DEPLOY, deployment("web", 2))
    workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out")
    workloads.http.patch(f"{DEPLOY}/web/scale", {"spec": {"replicas": 5}}, "merge")
    d = workloads.wait(
        lambda: (d := rolled_out(workloads, "web")) and d["status"]["replicas"] == 5 and d, "scaled to 5"
    )
    [rs] = sets(workloads, "web")
    assert rs["spec"]["replicas"] == 5
    assert rs["metadata"]["annotations"][rollout.DESIRED] == "5"
    assert d["metadata"]["annotations"][rollout.REVISION] == "1"


def test_recreate_waits_for_the_old_pods_to_go(workloads: Workloads) -> None:
    held = deployment("web", 2, on_node=False, strategy={"type": "Recreate"})
    held["spec"]["template"]["metadata"]["finalizers"] = ["example.com/hold"]
    workloads.http.post(DEPLOY, held)
    for pod in workloads.wait(lambda: len(workloads.pods("app=web")) == 2 and workloads.pods("app=web"), "two pods"):
        set_ready(workloads.http, pod)
    workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out")
    new_image(workloads, "web", "nginx:1.26")
    workloads.wait(
        lambda: all(p["metadata"].get("deletionTimestamp") for p in workloads.pods("app=web")), "old pods ending"
    )
    workloads.wait(lambda: get(workloads, "web")["status"].get("observedGeneration") == 2, "the change observed")
    assert len(sets(workloads, "web")) == 1  # no new ReplicaSet while old pods remain
    for pod in workloads.pods("app=web"):
        workloads.http.patch(f"{PODS}/{pod['metadata']['name']}", {"metadata": {"finalizers": None}}, "merge")
    workloads.wait(lambda: len(sets(workloads, "web")) == 2, "the new ReplicaSet")
    new_pods = workloads.wait(lambda: len(workloads.pods("app=web")) == 2 and workloads.pods("app=web"), "new pods")
    assert {p["spec"]["containers"][0]["image"] for p in new_pods} == {"nginx:1.26"}


def test_a_paused_deployment_does_not_roll_until_resumed(workloads: Workloads) -> None:
    workloads.http.post(DEPLOY, deployment("web", 2))
    workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out")
    workloads.http.patch(f"{DEPLOY}/web", {"spec": {"paused": True}}, "merge")
    new_image(workloads, "web", "nginx:1.26")

    def paused() -> bool:
        d = get(workloads, "web")
        reasons = {c["type"]: c["reason"] for c in d["status"].get("conditions") or []}
        return d["status"].get("observedGeneration") == 3 and reasons.get("Progressing") == "DeploymentPaused"

    workloads.wait(paused, "the pause observed")
    assert len(sets(workloads, "web")) == 1
    workloads.http.patch(f"{DEPLOY}/web", {"spec": {"paused": False}}, "merge")
    workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out after resuming")
    assert len(sets(workloads, "web")) == 2


def test_the_revision_history_limit_deletes_old_replica_sets(workloads: Workloads) -> None:
    workloads.http.post(DEPLOY, deployment("web", 1, revisionHistoryLimit=1))
    for image in ("nginx:1.26", "nginx:1.27", "nginx:1.28"):
        workloads.wait(lambda: rolled_out(workloads, "web"), "rolled out")
        new_image(workloads, "web", image)
    workloads.wait(lambda: rolled_out(workloads, "web") and len(sets(workloads, "web")) == 2, "one old set kept")
    revisions = sorted(r["metadata"]["annotations"][rollout.REVISION] for r in sets(workloads, "web"))
    assert revisions == ["3", "4"]


def test_a_rollout_past_its_deadline_is_reported(workloads: Workloads, kubectl: Kubectl) -> None:
    workloads.http.post(DEPLOY, deployment("web", 1, on_node=False, progressDeadlineSeconds=1))

    def timed_out() -> bool:
        conditions = get(workloads, "web").get("status", {}).get("conditions") or []
        return any(c["type"] == "Progressing" and c["reason"] == "ProgressDeadlineExceeded" for c in conditions)

    workloads.wait(timed_out, "the deadline passed")
    done = kubectl("rollout", "status", "deployment/web", "--timeout=20s", check=False)
    assert done.returncode != 0
    assert 'deployment "web" exceeded its progress deadline' in done.stderr


def test_kubectl_rollout_status_and_undo(workloads: Workloads, kubectl: Kubectl) -> None:
    workloads.http.post(DEPLOY, deployment("web", 2))
    assert (
        'deployment "web" successfully rolled out'
        in kubectl("rollout", "status", "deployment/web", "--timeout=60s").stdout
    )
    first = sets(workloads, "web")[0]["metadata"]["name"]
    new_image(workloads, "web", "nginx:1.26")
    kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    kubectl("rollout", "undo", "deployment/web")
    kubectl("rollout", "status", "deployment/web", "--timeout=60s")
    d = workloads.wait(
        lambda: (d := rolled_out(workloads, "web")) and d["metadata"]["annotations"][rollout.REVISION] == "3" and d,
        "undone",
    )
    current = next(r for r in sets(workloads, "web") if r["spec"]["replicas"] == 2)
    assert current["metadata"]["name"] == first  # the first ReplicaSet came back as revision 3
    assert current["metadata"]["annotations"][rollout.REVISION_HISTORY] == "1"
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    described = kubectl("describe", "deployment", "web").stdout
    assert f"NewReplicaSet:   {first} (2/2 replicas created)" in described
    assert "Progressing    True    NewReplicaSetAvailable" in described
    history = kubectl("rollout", "history", "deployment/web").stdout
    assert "2 " in history
    assert "3 " in history
