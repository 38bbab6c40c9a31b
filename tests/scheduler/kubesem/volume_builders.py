"""Storage object manifests for the volume tables (`volume_cases.py`): claims, volumes, classes,
CSINodes and pods that use them, in the shapes kube-scheduler's tests build them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from runtimekit.kube.objects import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from runtimekit.scheduler.kubesem.volumes import VolumeCatalog

Json = dict[str, Any]
NODE_KEY = "nodeKey"  # the node label the binder tables' volumes are pinned by
WAIT, IMMEDIATE = "WaitForFirstConsumer", "Immediate"


def pvc(
    name: str,
    size: str | None = "1G",
    cls: str | None = "waitClass",
    *,
    ns: str = "testns",
    volume: str = "",
    bound: bool = False,
    selected_node: str | None = None,
    rv: str = "1",
    uid: str = "pvc-uid",
    modes: Sequence[str] = (),
    phase: str | None = None,
    deleting: bool = False,
    owner_uid: str | None = None,
    volume_mode: str | None = "Filesystem",
    beta_class: str | None = None,
) -> PersistentVolumeClaim:
    """A claim; `volume` names the volume it is pre-bound (or, with `bound`, bound) to."""
    meta: Json = {"name": name, "namespace": ns, "uid": uid, "resourceVersion": rv}
    annotations: dict[str, str] = {}
    if bound:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    if selected_node is not None:
        annotations["volume.kubernetes.io/selected-node"] = selected_node
    if beta_class is not None:
        annotations["volume.beta.kubernetes.io/storage-class"] = beta_class
    if annotations:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}]
    spec: Json = {}
    if size is not None:
        spec["resources"] = {"requests": {"storage": size}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    if volume:
        spec["volumeName"] = volume
    if modes:
        spec["accessModes"] = list(modes)
    out: Json = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    if phase is not None:
        out["status"] = {"phase": phase}
    return cast(PersistentVolumeClaim, out)


def pv(
    name: str,
    node: str = "",
    capacity: str | None = "5G",
    cls: str = "waitClass",
    *,
    claim: PersistentVolumeClaim | None = None,
    rv: str = "1",
    phase: str | None = "Available",
    labels: Mapping[str, str] | None = None,
    affinity: Mapping[str, Sequence[str]] | None = None,
    csi: tuple[str, str] | None = None,
    source: tuple[str, Json] | None = None,
    modes: Sequence[str] = (),
    volume_mode: str | None = "Filesystem",
) -> PersistentVolume:
    """A volume; `node` pins it by `nodeKey` (the binder tables' way), `affinity` by any labels
    (one term, a requirement per key); `claim` binds it (claimRef, bound-by-controller)."""
    meta: Json = {"name": name, "resourceVersion": rv}
    if labels:
        meta["labels"] = dict(labels)
    spec: Json = {"storageClassName": cls}
    if capacity is not None:
        spec["capacity"] = {"storage": capacity}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    if modes:
        spec["accessModes"] = list(modes)
    pins = dict(affinity or {})
    if node:
        pins[NODE_KEY] = [node]
    if pins:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": k, "operator": "In", "values": list(v)} for k, v in pins.items()]}
                ]
            }
        }
    if claim is not None:
        claim_meta = claim["metadata"]
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim_meta.get("namespace", ""),
            "name": claim_meta.get("name", ""),
            "uid": claim_meta.get("uid", ""),
            "resourceVersion": claim_meta.get("resourceVersion", ""),
        }
        meta["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if source is not None:
        spec[source[0]] = dict(source[1])
    out: Json = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}
    if phase is not None:
        out["status"] = {"phase": phase}
    return cast(PersistentVolume, out)


def sc(
    name: str,
    mode: str | None = WAIT,
    provisioner: str = "",
    topologies: Sequence[Mapping[str, Sequence[str]]] = (),
) -> StorageClass:
    out: Json = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}}
    if mode is not None:
        out["volumeBindingMode"] = mode
    if provisioner:
        out["provisioner"] = provisioner
    if topologies:
        out["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]} for term in topologies
        ]
    return cast(StorageClass, out)


def csinode(name: str, drivers: Mapping[str, int | None], migrated: str = "") -> CSINode:
    """A CSINode with a count per driver (None: the driver reports no limit)."""
    listed: list[Json] = []
    for driver, count in drivers.items():
        entry: Json = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        listed.append(entry)
    meta: Json = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return cast(
        CSINode, {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": meta, "spec": {"drivers": listed}}
    )


def volume_pod(
    name: str = "test-pod",
    claims: Iterable[str] = (),
    *,
    ns: str = "testns",
    uid: str = "",
    node: str = "",
    ephemeral: Iterable[str] = (),
    inline: Iterable[tuple[str, Json]] = (),
) -> Json:
    """A pod using claims, generic ephemeral volumes (by volume name) and inline volumes (source, fields)."""
    volumes: list[Json] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    volumes += [{"name": f"inline{i}", kind: dict(fields)} for i, (kind, fields) in enumerate(inline)]
    spec: Json = {"containers": [{"name": "c", "image": "busybox"}]}
    if volumes:
        spec["volumes"] = volumes
    if node:
        spec["nodeName"] = node
    meta: Json = {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def catalog_of(
    claims: Iterable[PersistentVolumeClaim] = (),
    volumes: Iterable[PersistentVolume] = (),
    classes: Iterable[StorageClass] = (),
    csinodes: Iterable[CSINode] = (),
    version: int = 1,
) -> VolumeCatalog:
    return VolumeCatalog(
        {f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}": c for c in claims},
        {v["metadata"]["name"]: v for v in volumes},
        {s["metadata"]["name"]: s for s in classes},
        {n["metadata"]["name"]: n for n in csinodes},
        version,
    )
