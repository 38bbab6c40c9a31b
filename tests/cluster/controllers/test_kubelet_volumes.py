"""The simulated kubelet waits for a pod's volumes as kubelet's volume manager does: a pod whose
claim is not Bound, or whose ConfigMap or Secret is missing, stays Pending with its containers
`ContainerCreating` and a `FailedMount` Event, and runs once its volumes are there."""

from __future__ import annotations

from typing import Any

from fixtures.controllers import NODE, NS, PODS, Workloads

CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def pod(name: str, *volumes: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "c", "image": "nginx:1.25"}],
            "volumes": list(volumes),
        },
    }


def get(w: Workloads, name: str) -> dict[str, Any]:
    return w.http.get(f"{PODS}/{name}")


def phase(w: Workloads, name: str) -> str:
    return str((get(w, name).get("status") or {}).get("phase") or "")


def test_a_pod_waits_for_its_claim_to_be_bound(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, {"metadata": {"name": "fast"}, "provisioner": "example.com/none"})
    claim = {"spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"]}}
    claim["spec"]["resources"] = {"requests": {"storage": "1Gi"}}
    w.http.post(CLAIMS, {"metadata": {"name": "data"}, **claim})
    w.http.post(PODS, pod("web", {"name": "store", "persistentVolumeClaim": {"claimName": "data"}}))
    (event,) = w.wait(lambda: w.events("web", "FailedMount"), "FailedMount event")
    assert event["message"] == (
        "Unable to attach or mount volumes: unmounted volumes=[store], unattached volumes=[store]: "
        "error processing PVC default/data: PVC is not bound"
    )
    status = get(w, "web")["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    volume = {
        "metadata": {"name": "pv-a"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast",
            "hostPath": {"path": "/tmp/pv-a"},
        },
    }
    w.http.post(VOLUMES, volume)
    w.wait(lambda: phase(w, "web") == "Running", "pod running once its claim is bound")
    assert len(w.events("web", "FailedMount")) == 1


def test_a_pod_waits_for_a_missing_claim_and_configmap(workloads: Workloads) -> None:
    w = workloads
    w.http.post(
        PODS,
        pod(
            "web",
            {"name": "conf", "configMap": {"name": "settings"}},
            {"name": "maybe", "configMap": {"name": "absent", "optional": True}},
        ),
    )
    (event,) = w.wait(lambda: w.events("web", "FailedMount"), "FailedMount event")
    assert event["message"] == 'MountVolume.SetUp failed for volume "conf" : configmap "settings" not found'
    assert phase(w, "web") == "Pending"
    w.http.post(CONFIGMAPS, {"metadata": {"name": "settings"}, "data": {"a": "b"}})
    w.wait(lambda: phase(w, "web") == "Running", "pod running once its configmap exists")
    w.http.post(PODS, pod("lost", {"name": "store", "persistentVolumeClaim": {"claimName": "nowhere"}}))
    (event,) = w.wait(lambda: w.events("lost", "FailedMount"), "FailedMount event")
    assert 'persistentvolumeclaims "nowhere" not found' in event["message"]


def test_a_pod_with_ready_volumes_runs_at_once(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CONFIGMAPS, {"metadata": {"name": "settings"}, "data": {"a": "b"}})
    w.http.post(PODS, pod("web", {"name": "conf", "configMap": {"name": "settings"}}, {"name": "tmp", "emptyDir": {}}))
    w.wait(lambda: phase(w, "web") == "Running", "pod running")
    assert not w.events("web", "FailedMount")
