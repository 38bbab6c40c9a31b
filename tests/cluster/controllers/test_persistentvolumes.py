"""The PV controller and the local-path provisioner against the embedded API server, as kube's
`pv_controller` and Rancher's local-path provisioner behave: Immediate claims bound to the smallest
volume that fits (annotations, phases, status), pre-bound claims, WaitForFirstConsumer claims waiting
for the scheduler's selected node and then provisioned in the node's folder, reclaim policies
(Retain keeps, Delete removes a provisioned volume and its folder, fails a static one), lost claims,
claims without a class, and the default class the API server gives a claim."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.controllers import NS, Workloads
from runtimekit.cluster.controllers.localpath import PROVISIONER, LocalPathProvisioner, ensure_default_class
from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.kube.http import KubeHttp

CLAIMS = f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
NODE = "node-1"


@pytest.fixture
def nodes_root(workloads: Workloads, tmp_path: Path) -> Iterator[Path]:
    """The local-path provisioner on the same API server, its nodes' folders under tmp_path."""
    root = tmp_path / "nodes"
    http = KubeHttp.connect(server=workloads.server.url)
    ensure_default_class(http)
    manager = ControllerManager(http, [lambda h, i: LocalPathProvisioner(h, i, root)]).start()
    assert manager.synced(20)
    yield root
    manager.stop()
    http.close()


def storage_class(name: str, mode: str = "Immediate", provisioner: str = "example.com/none") -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def volume(name: str, size: str, cls: str = "fast", policy: str = "Retain", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
            "persistentVolumeReclaimPolicy": policy,
            "hostPath": {"path": f"/tmp/{name}"},
            **spec,
        },
    }


def claim(name: str, size: str = "1Gi", cls: str | None = "fast", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec},
    }
    if cls is not None:
        body["spec"]["storageClassName"] = cls
    return body


def get_claim(w: Workloads, name: str) -> dict[str, Any]:
    return w.http.get(f"{CLAIMS}/{name}")


def get_volume(w: Workloads, name: str) -> dict[str, Any] | None:
    found = [v for v in w.http.list(VOLUMES)[0] if v["metadata"]["name"] == name]
    return found[0] if found else None


def phase(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else (obj.get("status") or {}).get("phase")


def bound(w: Workloads, name: str) -> dict[str, Any] | None:
    got = get_claim(w, name)
    return got if phase(got) == "Bound" else None


def test_an_immediate_claim_takes_the_smallest_volume_that_fits(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    for name, size in (("pv-small", "1Gi"), ("pv-big", "10Gi"), ("pv-mid", "5Gi")):
        w.http.post(VOLUMES, volume(name, size))
    w.wait(lambda: all(phase(get_volume(w, n)) == "Available" for n in ("pv-small", "pv-big", "pv-mid")), "available")
    w.http.post(CLAIMS, claim("data", "2Gi"))
    got = w.wait(lambda: bound(w, "data"), "claim bound")
    assert got["spec"]["volumeName"] == "pv-mid"
    annotations = got["metadata"]["annotations"]
    assert annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert got["status"]["capacity"] == {"storage": "5Gi"}
    assert got["status"]["accessModes"] == ["ReadWriteOnce"]
    pv = w.wait(lambda: (v := get_volume(w, "pv-mid")) and phase(v) == "Bound" and v, "volume bound")
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (NS, "data", got["metadata"]["uid"])
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert phase(get_volume(w, "pv-small")) == phase(get_volume(w, "pv-big")) == "Available"


def test_a_prebound_claim_gets_its_volume(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(VOLUMES, volume("pv-a", "1Gi"))
    w.http.post(VOLUMES, volume("pv-b", "1Gi"))
    w.http.post(CLAIMS, claim("data", volumeName="pv-b"))
    got = w.wait(lambda: bound(w, "data"), "claim bound")
    assert got["spec"]["volumeName"] == "pv-b"
    assert "pv.kubernetes.io/bound-by-controller" not in got["metadata"]["annotations"]  # its author chose it
    w.wait(lambda: phase(get_volume(w, "pv-b")) == "Bound", "volume bound")
    assert phase(get_volume(w, "pv-a")) == "Available"


def test_a_claim_prebound_to_a_volume_still_to_come_is_bound_when_it_comes(workloads: Workloads) -> None:
    """The claim names a volume the controller has not seen yet (created after it, or its event still
    on the way): Pending, then bound as soon as the volume arrives."""
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(CLAIMS, claim("data", volumeName="pv-later"))
    w.wait(lambda: (c := get_claim(w, "data")) and phase(c) == "Pending", "claim pending")
    time.sleep(0.5)  # the controller has synced the claim, the volume still missing (its phase alone
    # does not say so: the API server gives a new claim Pending)
    w.http.post(VOLUMES, volume("pv-later", "1Gi"))
    got = w.wait(lambda: bound(w, "data"), "claim bound")
    assert got["spec"]["volumeName"] == "pv-later"
    w.wait(lambda: phase(get_volume(w, "pv-later")) == "Bound", "volume bound")


def test_a_volume_prebound_to_a_claim_is_kept_for_it(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(VOLUMES, volume("pv-kept", "1Gi", claimRef={"namespace": NS, "name": "owner"}))
    w.http.post(CLAIMS, claim("other"))
    w.wait(lambda: w.events("other", "FailedBinding") or w.events("other", "ExternalProvisioning"), "other waits")
    assert phase(get_claim(w, "other")) == "Pending"
    w.http.post(CLAIMS, claim("owner"))
    assert w.wait(lambda: bound(w, "owner"), "owner bound")["spec"]["volumeName"] == "pv-kept"


def test_a_claim_of_a_class_without_volumes_waits_for_its_provisioner(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast", provisioner="example.com/nfs"))
    w.http.post(CLAIMS, claim("data"))
    (event,) = w.wait(lambda: w.events("data", "ExternalProvisioning"), "ExternalProvisioning event")
    assert '"example.com/nfs"' in event["message"]
    annotations = get_claim(w, "data")["metadata"]["annotations"]
    assert annotations["volume.kubernetes.io/storage-provisioner"] == "example.com/nfs"
    assert annotations["volume.beta.kubernetes.io/storage-provisioner"] == "example.com/nfs"
    assert phase(get_claim(w, "data")) == "Pending"
    w.http.post(VOLUMES, volume("pv-late", "1Gi"))  # a volume made later is found
    assert w.wait(lambda: bound(w, "data"), "claim bound")["spec"]["volumeName"] == "pv-late"


def test_a_claim_without_a_class_and_volumes_fails_binding(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLAIMS, claim("data", cls=""))
    (event,) = w.wait(lambda: w.events("data", "FailedBinding"), "FailedBinding event")
    assert event["message"] == "no persistent volumes available for this claim and no storage class is set"
    assert phase(get_claim(w, "data")) == "Pending"


def test_a_retained_volume_is_released_with_its_claim(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(VOLUMES, volume("pv-a", "1Gi"))
    w.http.post(CLAIMS, claim("data"))
    w.wait(lambda: bound(w, "data"), "claim bound")
    w.http.delete(f"{CLAIMS}/data")
    w.wait(lambda: phase(get_volume(w, "pv-a")) == "Released", "volume released")
    w.http.post(CLAIMS, claim("data"))  # a new claim of the same name does not get a released volume
    w.wait(lambda: w.events("data", "ExternalProvisioning"), "the new claim waits")
    assert phase(get_volume(w, "pv-a")) == "Released"
    assert phase(get_claim(w, "data")) == "Pending"


def test_a_static_volume_with_delete_policy_fails(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(VOLUMES, volume("pv-a", "1Gi", policy="Delete"))
    w.http.post(CLAIMS, claim("data"))
    w.wait(lambda: bound(w, "data"), "claim bound")
    w.http.delete(f"{CLAIMS}/data")
    w.wait(lambda: phase(get_volume(w, "pv-a")) == "Failed", "volume failed")
    assert w.wait(lambda: w.events("pv-a", "VolumeFailedDelete"), "VolumeFailedDelete event")


def test_a_claim_whose_volume_is_deleted_is_lost(workloads: Workloads) -> None:
    w = workloads
    w.http.post(CLASSES, storage_class("fast"))
    w.http.post(VOLUMES, volume("pv-a", "1Gi"))
    w.http.post(CLAIMS, claim("data"))
    w.wait(lambda: bound(w, "data"), "claim bound")
    w.http.delete(f"{VOLUMES}/pv-a")
    w.wait(lambda: phase(get_claim(w, "data")) == "Lost", "claim lost")
    (event,) = w.wait(lambda: w.events("data", "ClaimLost"), "ClaimLost event")
    assert event["message"] == "Bound claim has lost its PersistentVolume. Data on the volume is lost!"


def test_the_default_class_is_given_to_a_claim_without_one(workloads: Workloads, nodes_root: Path) -> None:
    w = workloads
    classes = {c["metadata"]["name"]: c for c in w.http.list(CLASSES)[0]}
    standard = classes["standard"]
    assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert (standard["provisioner"], standard["volumeBindingMode"], standard["reclaimPolicy"]) == (
        PROVISIONER,
        "WaitForFirstConsumer",
        "Delete",
    )
    w.http.post(CLAIMS, claim("defaulted", cls=None))
    w.http.post(CLAIMS, claim("none", cls=""))
    assert get_claim(w, "defaulted")["spec"]["storageClassName"] == "standard"
    assert get_claim(w, "none")["spec"]["storageClassName"] == ""  # "" asks for no class


def test_wait_for_first_consumer_then_provisioned_on_the_selected_node(workloads: Workloads, nodes_root: Path) -> None:
    w = workloads
    w.http.post(CLAIMS, claim("data", "3Gi", cls="standard"))
    (event,) = w.wait(lambda: w.events("data", "WaitForFirstConsumer"), "WaitForFirstConsumer event")
    assert event["message"] == "waiting for first consumer to be created before binding"
    assert phase(get_claim(w, "data")) == "Pending"
    assert not w.http.list(VOLUMES)[0]
    # the scheduler's choice
    w.http.patch(f"{CLAIMS}/data", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": NODE}}}, "merge")
    got = w.wait(lambda: bound(w, "data"), "claim bound")
    uid = got["metadata"]["uid"]
    assert got["spec"]["volumeName"] == f"pvc-{uid}"
    assert got["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == PROVISIONER
    pv = get_volume(w, f"pvc-{uid}")
    assert pv is not None
    folder = nodes_root / NODE / "local-path" / f"pvc-{uid}_{NS}_data"
    assert pv["spec"]["hostPath"]["path"] == str(folder)
    assert folder.is_dir()
    assert pv["spec"]["capacity"] == {"storage": "3Gi"}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["storageClassName"] == "standard"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}
    assert w.events("data", "ProvisioningSucceeded")
    # Delete reclaim: the volume and its folder go with the claim
    w.http.delete(f"{CLAIMS}/data")
    w.wait(lambda: get_volume(w, f"pvc-{uid}") is None, "volume deleted")
    assert not folder.exists()


def test_local_path_refuses_what_it_cannot_serve(workloads: Workloads, nodes_root: Path) -> None:
    w = workloads
    body = claim("shared", cls="standard")
    body["spec"]["accessModes"] = ["ReadWriteMany"]
    body["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": NODE}
    w.http.post(CLAIMS, body)
    (event,) = w.wait(lambda: w.events("shared", "ProvisioningFailed"), "ProvisioningFailed event")
    assert "ReadWriteOnce" in event["message"]
    assert phase(get_claim(w, "shared")) == "Pending"
