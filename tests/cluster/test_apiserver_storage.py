"""Storage kinds on the embedded API server: PersistentVolumes, StorageClasses and CSINodes served,
kube-apiserver's defaults, the DefaultStorageClass admission, and what `kubectl get pvc,pv,sc`
prints (the real kubectl)."""

from __future__ import annotations

from typing import Any

from fixtures.apiserver import Kubectl, http_client
from runtimekit.cluster.apiserver import ApiServer

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
CSINODES = "/apis/storage.k8s.io/v1/csinodes"


def post(server: ApiServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with http_client(server.url) as client:
        response = client.post(path, json=body)
        assert response.status_code == 201, response.text
        made: dict[str, Any] = response.json()
        return made


def claim(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec},
    }


def test_defaults_and_the_default_class(apiserver: ApiServer) -> None:
    made = post(apiserver, CLASSES, {"metadata": {"name": "plain"}, "provisioner": "example.com/x"})
    assert (made["reclaimPolicy"], made["volumeBindingMode"]) == ("Delete", "Immediate")
    volume = post(apiserver, VOLUMES, {"metadata": {"name": "pv-a"}, "spec": {"capacity": {"storage": "1Gi"}}})
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["volumeMode"] == "Filesystem"
    assert volume["status"]["phase"] == "Pending"
    before = post(apiserver, CLAIMS, claim("before"))
    assert "storageClassName" not in before["spec"]  # no default class yet
    assert (before["spec"]["volumeMode"], before["status"]["phase"]) == ("Filesystem", "Pending")
    default = {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}
    post(apiserver, CLASSES, {"metadata": default, "provisioner": "rancher.io/local-path"})
    assert post(apiserver, CLAIMS, claim("after"))["spec"]["storageClassName"] == "standard"
    assert post(apiserver, CLAIMS, claim("chosen", storageClassName="plain"))["spec"]["storageClassName"] == "plain"
    assert post(apiserver, CLAIMS, claim("unclassed", storageClassName=""))["spec"]["storageClassName"] == ""
    post(apiserver, CSINODES, {"metadata": {"name": "node-1"}, "spec": {"drivers": []}})
    with http_client(apiserver.url) as client:
        assert client.get(f"{CSINODES}/node-1").status_code == 200
        deleted = client.delete(f"{CLAIMS}/before")
        assert deleted.status_code == 200
        assert deleted.json()["metadata"]["name"] == "before"


def test_kubectl_get_storage(apiserver: ApiServer, kubectl: Kubectl) -> None:
    default = {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}
    post(apiserver, CLASSES, {"metadata": default, "provisioner": "rancher.io/local-path"})
    spec = {
        "capacity": {"storage": "5Gi"},
        "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
        "storageClassName": "standard",
        "claimRef": {"namespace": "default", "name": "data"},
    }
    post(apiserver, VOLUMES, {"metadata": {"name": "pv-a"}, "spec": spec})
    made = post(apiserver, CLAIMS, claim("data", volumeName="pv-a"))
    with http_client(apiserver.url) as client:
        status = {"phase": "Bound", "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"]}
        response = client.put(f"{CLAIMS}/data/status", json={**made, "status": status})
        assert response.status_code == 200, response.text
    claims = kubectl("get", "pvc").stdout.splitlines()
    assert claims[0].split()[:6] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES"]
    assert claims[1].split()[:6] == ["data", "Bound", "pv-a", "5Gi", "RWO", "standard"]
    volumes = kubectl("get", "pv").stdout.splitlines()
    assert volumes[0].split()[:8] == ["NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM"]
    assert volumes[1].split()[:6] == ["pv-a", "5Gi", "RWO,ROX", "Retain", "Pending", "default/data"]
    classes = kubectl("get", "sc").stdout.splitlines()
    assert classes[0].split()[:3] == ["NAME", "PROVISIONER", "RECLAIMPOLICY"]
    assert classes[1].split()[:5] == ["standard", "(default)", "rancher.io/local-path", "Delete", "Immediate"]
