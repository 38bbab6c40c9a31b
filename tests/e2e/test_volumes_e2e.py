"""End to end: volumes on `runtimekit up`, driven by the real kubectl, as on a kind cluster. A
StatefulSet of GPU-share pods with `volumeClaimTemplates` runs with each claim Bound to a local-path
volume on its pod's node (the default class `standard`, WaitForFirstConsumer, provisioned once the
scheduler picked the node), and a recreated pod goes back to its volume's node; a claim of an
Immediate class is bound by the PV controller before any pod uses it; a volume pinned to one node
brings its pod there; a gang with one volume that cannot be bound is not placed at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.kubeup import UpCluster, runtimekit_up
from fixtures.waiting import wait_for
from runtimekit.protocol import KitProtocol

pytestmark = pytest.mark.e2e

P = KitProtocol.default()
GPU = {"aliyun.com/gpu-core.percentage": 25, "aliyun.com/gpu-memory": 4}

STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: store}
spec:
  serviceName: store
  replicas: 2
  selector: {matchLabels: {app: store}}
  template:
    metadata: {labels: {app: store}}
    spec:
      containers:
      - name: main
        image: example/store:1.0
        resources:
          limits: {aliyun.com/gpu-core.percentage: 25, aliyun.com/gpu-memory: 4}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[UpCluster]:
    with runtimekit_up(["--nodes", "2", "--gpus-per-node", "4", "--scheduler-name", "volcano"], P) as up:
        yield up


def apply(cluster: UpCluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def claim(name: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def storage_class(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": mode,
    }


def volume(name: str, storage_class: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": "2Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "hostPath": {"path": f"/tmp/{name}"},
    }
    if node is not None:
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def pod(name: str, *claims: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": GPU}}],
            "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
        },
    }


def claim_phase(cluster: UpCluster, name: str) -> str:
    return str(cluster.json("get", "pvc", name).get("status", {}).get("phase", ""))


def volume_node(cluster: UpCluster, name: str) -> str:
    pv = cluster.json("get", "pv", name)
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    return str(term["values"][0])


def nodes(cluster: UpCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.json("get", "nodes")["items"])


def test_a_statefulset_of_gpu_shares_runs_with_its_claims_on_its_nodes(cluster: UpCluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=STATEFULSET)
    out = cluster.kubectl("rollout", "status", "statefulset/store", "--timeout=180s").stdout
    assert "2 new pods have been updated" in out
    pods = cluster.running_selected("app=store", 2)
    table = cluster.kubectl("get", "pvc").stdout
    for pod_ in pods:
        name = pod_["metadata"]["name"]
        pvc = cluster.json("get", "pvc", f"data-{name}")
        assert pvc["status"]["phase"] == "Bound", table
        assert pvc["spec"]["storageClassName"] == "standard"  # the default class
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == pod_["spec"]["nodeName"]
        assert volume_node(cluster, pvc["spec"]["volumeName"]) == pod_["spec"]["nodeName"]
        folder = Path(cluster.json("get", "pv", pvc["spec"]["volumeName"])["spec"]["hostPath"]["path"])
        assert folder.is_dir()
        assert folder.parent.parent.name == pod_["spec"]["nodeName"]  # <state>/nodes/<node>/local-path/<pvc>
    # a recreated pod goes back to its volume's node, and waits for it while that node is cordoned
    first = next(p for p in pods if p["metadata"]["name"] == "store-0")
    node = first["spec"]["nodeName"]
    cluster.kubectl("cordon", node)
    cluster.kubectl("delete", "pod", "store-0", "--timeout=60s")
    message = cluster.pending_because("store-0", "volume node affinity conflict")
    assert "unschedulable" in message
    cluster.kubectl("uncordon", node)
    [again] = cluster.running("store-0")
    assert again["spec"]["nodeName"] == node
    cluster.kubectl("delete", "statefulset", "store", "--timeout=120s")
    wait_for(lambda: not cluster.pods("app=store"), what="pods gone")
    cluster.kubectl("delete", "pvc", "data-store-0", "data-store-1", "--timeout=60s")
    wait_for(lambda: not cluster.json("get", "pv")["items"], what="the provisioned volumes deleted (Delete policy)")
    assert not folder.exists()


def test_an_immediate_claim_is_bound_before_its_pod(cluster: UpCluster) -> None:
    apply(cluster, storage_class("manual", "Immediate"), volume("pv-manual", "manual"), claim("manual-data", "manual"))
    wait_for(lambda: claim_phase(cluster, "manual-data") == "Bound", what="the claim bound")
    row = cluster.kubectl("get", "pvc", "manual-data").stdout.splitlines()[1].split()
    assert row[:6] == ["manual-data", "Bound", "pv-manual", "2Gi", "RWO", "manual"]
    apply(cluster, pod("uses-manual", "manual-data"))
    cluster.running("uses-manual")
    cluster.kubectl("delete", "pod", "uses-manual", "--timeout=60s")
    cluster.kubectl("delete", "pvc", "manual-data", "--timeout=60s")
    wait_for(
        lambda: cluster.json("get", "pv", "pv-manual")["status"]["phase"] == "Released",
        what="the volume released (Retain)",
    )


def test_a_volume_pinned_to_a_node_brings_its_pod_there(cluster: UpCluster) -> None:
    for target in nodes(cluster):
        name = f"pinned-{target}"
        apply(
            cluster,
            storage_class("local-manual", "WaitForFirstConsumer"),
            volume(f"pv-{name}", "local-manual", target),
            claim(name, "local-manual"),
        )
        wait_for(lambda n=name: cluster.events(n, "WaitForFirstConsumer"), what=f"{name} waits for its pod")  # type: ignore[misc]
        assert claim_phase(cluster, name) == "Pending"
        apply(cluster, pod(f"uses-{name}", name))
        [placed] = cluster.running(f"uses-{name}")
        assert placed["spec"]["nodeName"] == target
        assert cluster.json("get", "pvc", name)["spec"]["volumeName"] == f"pv-{name}"
        assert claim_phase(cluster, name) == "Bound"
        cluster.kubectl("delete", "pod", f"uses-{name}", "--timeout=60s")


def test_a_gang_with_one_unbindable_volume_is_not_placed_at_all(cluster: UpCluster) -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"minMember": 2},
    }
    member = {"scheduling.k8s.io/group-name": "gang"}
    apply(
        cluster,
        storage_class("nowhere", "WaitForFirstConsumer"),  # no provisioner, no volume
        claim("gang-free", "standard"),
        claim("gang-stuck", "nowhere"),
        group,
        pod("gang-0", "gang-free", annotations=member),
        pod("gang-1", "gang-stuck", annotations=member),
    )
    message = cluster.pending_because("gang-1", "didn't find available persistent volumes to bind")
    assert "0/2 nodes are available" in message
    wait_for(lambda: cluster.events("gang-0", "FailedScheduling"), what="gang-0 told too")
    for name in ("gang-0", "gang-1"):
        found = cluster.pod(name)
        assert not found["spec"].get("nodeName"), found["spec"]
        assert found["status"].get("phase") == "Pending"
    # nothing was bound or provisioned for the gang's free claim either
    free = cluster.json("get", "pvc", "gang-free")
    assert free["status"]["phase"] == "Pending"
    assert "volume.kubernetes.io/selected-node" not in free["metadata"].get("annotations", {})
    # once a volume exists for the stuck claim, the whole gang runs
    apply(cluster, volume("pv-gang", "nowhere"))
    cluster.running("gang-0", "gang-1")
    assert claim_phase(cluster, "gang-free") == claim_phase(cluster, "gang-stuck") == "Bound"
