"""The StatefulSet controller against the embedded API server: ordinal names and identity, OrderedReady
creation and scale-down from the highest ordinal, Parallel, claims, failed pods replaced, rolling
updates with revisions and partitions, and what `kubectl rollout status` reads (kube's
stateful_set_control semantics)."""

from __future__ import annotations

from typing import Any

from fixtures.apiserver import Kubectl
from fixtures.controllers import NS, PODS, Workloads, set_phase, set_ready, template

STS = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
REVISIONS = f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"
CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"


def statefulset(name: str, replicas: int, on_node: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, on_node),
            **spec,
        },
    }


def names(w: Workloads) -> list[str]:
    return sorted(p["metadata"]["name"] for p in w.pods("app=db"))


def status(w: Workloads) -> dict[str, Any]:
    result: dict[str, Any] = w.http.get(f"{STS}/db").get("status") or {}
    return result


def settled(w: Workloads, replicas: int) -> dict[str, Any] | None:
    sts = w.http.get(f"{STS}/db")
    got = sts.get("status") or {}
    done = (
        got.get("observedGeneration") == sts["metadata"]["generation"]
        and got.get("readyReplicas") == got.get("replicas") == got.get("updatedReplicas") == replicas
        and got.get("currentRevision") == got.get("updateRevision")
    )
    return got if done else None


def test_ordered_ready_creates_one_ordinal_after_the_other(workloads: Workloads) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    workloads.http.post(STS, statefulset("db", 3, on_node=False, volumeClaimTemplates=[claim]))
    for expected in (["db-0"], ["db-0", "db-1"], ["db-0", "db-1", "db-2"]):
        workloads.wait(lambda e=expected: names(workloads) == e, f"pods {expected}")
        workloads.wait(lambda e=expected: status(workloads).get("replicas") == len(e), "the status")
        assert names(workloads) == expected  # nothing more until the newest is Ready
        set_ready(workloads.http, workloads.http.get(f"{PODS}/{expected[-1]}"))
    got = workloads.wait(lambda: settled(workloads, 3), "three ready")
    pod = workloads.http.get(f"{PODS}/db-1")
    labels = pod["metadata"]["labels"]
    assert labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert labels["apps.kubernetes.io/pod-index"] == "1"
    assert labels["controller-revision-hash"] == got["updateRevision"]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("db-1", "db")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    assert volume["persistentVolumeClaim"]["claimName"] == "data-db-1"
    claims = sorted(c["metadata"]["name"] for c in workloads.http.list(CLAIMS)[0])
    assert claims == ["data-db-0", "data-db-1", "data-db-2"]
    messages = {e["message"] for e in workloads.events("db", "SuccessfulCreate")}
    assert "create Pod db-0 in StatefulSet db successful" in messages
    assert "create Claim data-db-2 Pod db-2 in StatefulSet db success" in messages


def test_parallel_creates_every_pod_at_once(workloads: Workloads) -> None:
    workloads.http.post(STS, statefulset("db", 3, on_node=False, podManagementPolicy="Parallel"))
    workloads.wait(lambda: names(workloads) == ["db-0", "db-1", "db-2"], "three pods without any Ready")


def test_scale_down_goes_from_the_highest_ordinal_one_at_a_time(workloads: Workloads) -> None:
    held = statefulset("db", 3, on_node=False)
    held["spec"]["template"]["metadata"]["finalizers"] = ["example.com/hold"]
    workloads.http.post(STS, held)
    for index in range(3):
        pod = workloads.wait(
            lambda i=index: workloads.pods(f"statefulset.kubernetes.io/pod-name=db-{i}"), f"db-{index}"
        )
        set_ready(workloads.http, pod[0])
    workloads.wait(lambda: settled(workloads, 3), "three ready")
    workloads.http.patch(f"{STS}/db/scale", {"spec": {"replicas": 1}}, "merge")
    workloads.wait(lambda: workloads.http.get(f"{PODS}/db-2")["metadata"].get("deletionTimestamp"), "db-2 terminating")
    workloads.wait(lambda: status(workloads).get("observedGeneration") == 2, "the change observed")
    assert not workloads.http.get(f"{PODS}/db-1")["metadata"].get("deletionTimestamp")  # waits for db-2 to go
    workloads.http.patch(f"{PODS}/db-2", {"metadata": {"finalizers": None}}, "merge")
    workloads.wait(lambda: workloads.http.get(f"{PODS}/db-1")["metadata"].get("deletionTimestamp"), "db-1 terminating")
    workloads.http.patch(f"{PODS}/db-1", {"metadata": {"finalizers": None}}, "merge")
    workloads.wait(lambda: names(workloads) == ["db-0"], "db-0 alone")


def test_a_failed_pod_is_recreated(workloads: Workloads) -> None:
    workloads.http.post(STS, statefulset("db", 2, on_node=False))
    for index in range(2):
        pod = workloads.wait(
            lambda i=index: workloads.pods(f"statefulset.kubernetes.io/pod-name=db-{i}"), f"db-{index}"
        )
        set_ready(workloads.http, pod[0])
    workloads.wait(lambda: settled(workloads, 2), "two ready")
    old = workloads.http.get(f"{PODS}/db-0")
    set_phase(workloads.http, old, "Failed", exit_code=1)

    def replaced() -> bool:  # one list a look: the old pod may go between two lists
        pods = workloads.pods("statefulset.kubernetes.io/pod-name=db-0")
        return bool(pods) and pods[0]["metadata"]["uid"] != old["metadata"]["uid"]

    workloads.wait(replaced, "a new db-0")
    [event] = workloads.events("db", "RecreatingFailedPod")
    assert event["message"] == "StatefulSet default/db is recreating failed Pod db-0"


def test_rolling_update_replaces_pods_from_the_highest_ordinal(workloads: Workloads) -> None:
    workloads.http.post(STS, statefulset("db", 3))
    first = workloads.wait(lambda: settled(workloads, 3), "three ready")
    containers = [{"name": "c", "image": "nginx:1.26"}]
    workloads.http.patch(f"{STS}/db", {"spec": {"template": {"spec": {"containers": containers}}}}, "strategic")
    got = workloads.wait(
        lambda: (s := settled(workloads, 3)) and s["updateRevision"] != first["updateRevision"] and s, "rolled"
    )
    assert {p["spec"]["containers"][0]["image"] for p in workloads.pods("app=db")} == {"nginx:1.26"}
    deletions = [e["message"] for e in workloads.events("db", "SuccessfulDelete")]
    assert sorted(deletions) == [f"delete Pod db-{i} in StatefulSet db successful" for i in range(3)]
    revisions = {r["metadata"]["name"]: r["revision"] for r in workloads.http.list(REVISIONS)[0]}
    assert revisions == {first["updateRevision"]: 1, got["updateRevision"]: 2}
    workloads.http.patch(
        f"{STS}/db",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}},
        "strategic",
    )
    back = workloads.wait(
        lambda: (s := settled(workloads, 3)) and s["updateRevision"] == first["updateRevision"] and s, "back"
    )
    revisions = {r["metadata"]["name"]: r["revision"] for r in workloads.http.list(REVISIONS)[0]}
    assert revisions[back["updateRevision"]] == 3  # the old revision came back with a new number


def test_a_partition_keeps_lower_ordinals_at_the_current_revision(workloads: Workloads, kubectl: Kubectl) -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    workloads.http.post(STS, statefulset("db", 3, updateStrategy=strategy))
    workloads.wait(lambda: settled(workloads, 3), "three ready")
    containers = [{"name": "c", "image": "nginx:1.26"}]
    workloads.http.patch(f"{STS}/db", {"spec": {"template": {"spec": {"containers": containers}}}}, "strategic")

    def partitioned() -> bool:
        got = status(workloads)
        return got.get("observedGeneration") == 2 and got.get("updatedReplicas") == 1 and got.get("readyReplicas") == 3

    workloads.wait(partitioned, "db-2 updated")
    images = {p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in workloads.pods("app=db")}
    assert images == {"db-0": "nginx:1.25", "db-1": "nginx:1.25", "db-2": "nginx:1.26"}
    out = kubectl("rollout", "status", "statefulset/db", "--timeout=30s").stdout
    assert "partitioned roll out complete: 1 new pods have been updated" in out


def test_kubectl_rollout_status_of_a_statefulset(workloads: Workloads, kubectl: Kubectl) -> None:
    workloads.http.post(STS, statefulset("db", 2))
    out = kubectl("rollout", "status", "statefulset/db", "--timeout=60s").stdout
    assert "partitioned roll out complete: 2 new pods have been updated" in out
    assert "db" in kubectl("get", "sts").stdout
    revisions = kubectl("get", "controllerrevisions").stdout.splitlines()
    assert revisions[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert "statefulset.apps/db" in revisions[1]
