"""A local-path provisioner for the embedded cluster, as Rancher's `local-path-provisioner` (kind's
default storage) behaves, with its provisioner name `rancher.io/local-path` and kind's default class
`standard` (`default_storage_class`: the default class, WaitForFirstConsumer, reclaim policy Delete).

- Provisioning: a claim the PV controller left to this provisioner (its
  `volume.kubernetes.io/storage-provisioner` annotation) once the scheduler has given it a node
  (`volume.kubernetes.io/selected-node`) gets a folder under that node's state folder
  (`<root>/<node>/local-path/pvc-<uid>_<namespace>_<name>`) and a PersistentVolume `pvc-<claim uid>`:
  a `hostPath` of that folder, node affinity to the node (`kubernetes.io/hostname`), the claim's size,
  access modes and volume mode, the class's reclaim policy, pre-bound to the claim (the PV controller
  then binds both), annotated `pv.kubernetes.io/provisioned-by: rancher.io/local-path`. Events
  `Provisioning` and `ProvisioningSucceeded` (or `ProvisioningFailed`: access modes other than
  ReadWriteOnce/ReadWriteOncePod, or the Block volume mode, which local-path does not serve).
- Deleting: a volume it provisioned that is Released with reclaim policy Delete loses its folder,
  then is deleted.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from runtimekit.cluster.controllers.base import Controller
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import Change, Informers, ObjectCache
from runtimekit.kube.objects import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    annotations_of,
    meta,
    object_key,
)
from runtimekit.kube.semantics.volumes import (
    ANN_DEFAULT_CLASS,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    claim_ref_of,
)

log = logging.getLogger(__name__)
PROVISIONER = "rancher.io/local-path"
DEFAULT_CLASS = "standard"
ANN_NODE = "local.path.provisioner/selected-node"
HOSTNAME = "kubernetes.io/hostname"
SERVED_MODES = frozenset({"ReadWriteOnce", "ReadWriteOncePod"})
CLAIMS_PATH = "/api/v1/persistentvolumeclaims"
VOLUMES_PATH = "/api/v1/persistentvolumes"
CLASSES_PATH = "/apis/storage.k8s.io/v1/storageclasses"


def default_storage_class() -> StorageClass:
    """kind's default class: `standard`, the default, local-path, WaitForFirstConsumer, Delete."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS, "annotations": {ANN_DEFAULT_CLASS: "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
    }


def ensure_default_class(http: KubeHttp) -> None:
    """Create the default class unless a class of its name exists (a kept state folder)."""
    try:
        http.post(object_path("storage.k8s.io/v1", "storageclasses"), dict(default_storage_class()))
    except KubeError as exc:
        if exc.code != 409:
            raise


def volume_folder(root: Path, node: str, claim: PersistentVolumeClaim) -> Path:
    claim_meta = meta(claim)
    name = f"pvc-{claim_meta.get('uid', '')}_{claim_meta.get('namespace', '')}_{claim_meta.get('name', '')}"
    return root / node / "local-path" / name


class LocalPathProvisioner(Controller):
    """See the module docstring. `root` holds the nodes' state folders (`<root>/<node>`)."""

    name = "local-path-provisioner"

    def __init__(self, http: KubeHttp, informers: Informers, root: Path) -> None:
        super().__init__(http, informers)
        self.root = root
        self.claims: ObjectCache[PersistentVolumeClaim] = self.watch(
            CLAIMS_PATH, PersistentVolumeClaim, self._on_claim
        ).cache
        self.volumes: ObjectCache[PersistentVolume] = self.watch(VOLUMES_PATH, PersistentVolume, self._on_volume).cache
        self.classes: ObjectCache[StorageClass] = self.watch(CLASSES_PATH, StorageClass, lambda change: None).cache
        self._failed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _on_claim(self, change: Change[PersistentVolumeClaim]) -> None:
        if change.new is not None and annotations_of(change.new).get(ANN_STORAGE_PROVISIONER) == PROVISIONER:
            self.queue.add("claim:" + object_key(change.new))

    def _on_volume(self, change: Change[PersistentVolume]) -> None:
        if change.new is not None and annotations_of(change.new).get(ANN_DYNAMICALLY_PROVISIONED) == PROVISIONER:
            self.queue.add("volume:" + object_key(change.new))

    def sync(self, key: str) -> None:
        kind, _, name = key.partition(":")
        if kind == "claim":
            claim = self.claims.get(name)
            if claim is not None:
                self._provision(claim)
        else:
            volume = self.volumes.get(name)
            if volume is not None:
                self._delete(volume)

    # -- provisioning --------------------------------------------------------------------------
    def _provision(self, claim: PersistentVolumeClaim) -> None:
        spec = claim.get("spec") or {}
        node = annotations_of(claim).get(ANN_SELECTED_NODE)
        if spec.get("volumeName") or meta(claim).get("deletionTimestamp") or not node:
            return
        name = f"pvc-{meta(claim).get('uid', '')}"
        if self.volumes.get(name) is not None:
            return  # provisioned; the PV controller binds it
        storage_class = self.classes.get(claim_class(claim))
        if storage_class is None or storage_class.get("provisioner") != PROVISIONER:
            return
        modes = list(spec.get("accessModes") or ["ReadWriteOnce"])
        if not set(modes) <= SERVED_MODES:
            self._refuse(claim, "NodePath only supports ReadWriteOnce and ReadWriteOncePod access modes")
            return
        if (spec.get("volumeMode") or "Filesystem") != "Filesystem":
            self._refuse(claim, "local-path does not provision volumes in Block volume mode")
            return
        key = object_key(claim)
        self.event(
            claim,
            "v1",
            "PersistentVolumeClaim",
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{key}"',
        )
        folder = volume_folder(self.root, node, claim)
        folder.mkdir(parents=True, exist_ok=True)
        volume = self._volume(name, claim, node, folder, storage_class)
        try:
            self.create("v1", "persistentvolumes", volume, self.volumes)
        except KubeError as exc:
            if exc.code != 409:
                raise
        log.info("local-path: provisioned %s for claim %s on %s at %s", name, key, node, folder)
        self.event(
            claim,
            "v1",
            "PersistentVolumeClaim",
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {name}",
        )

    @staticmethod
    def _volume(
        name: str, claim: PersistentVolumeClaim, node: str, folder: Path, storage_class: StorageClass
    ) -> PersistentVolume:
        spec = claim.get("spec") or {}
        requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {ANN_DYNAMICALLY_PROVISIONED: PROVISIONER, ANN_NODE: node},
            },
            "spec": {
                "capacity": {"storage": requested},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": str(storage_class.get("reclaimPolicy") or "Delete"),
                "storageClassName": claim_class(claim),
                "volumeMode": str(spec.get("volumeMode") or "Filesystem"),
                "claimRef": claim_ref_of(claim),
                "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                        ]
                    }
                },
            },
        }

    def _refuse(self, claim: PersistentVolumeClaim, message: str) -> None:
        told = (str(meta(claim).get("uid", "")), message)
        with self._lock:
            if told in self._failed:
                return
            self._failed.add(told)
        self.event(claim, "v1", "PersistentVolumeClaim", "Warning", "ProvisioningFailed", message)

    # -- deleting ------------------------------------------------------------------------------
    def _delete(self, volume: PersistentVolume) -> None:
        spec = volume.get("spec") or {}
        released = (volume.get("status") or {}).get("phase") == "Released"
        if (
            not released
            or spec.get("persistentVolumeReclaimPolicy") != "Delete"
            or meta(volume).get("deletionTimestamp")
        ):
            return
        path = str((spec.get("hostPath") or {}).get("path") or "")
        if path and Path(path).is_relative_to(self.root):  # only what it made
            shutil.rmtree(path, ignore_errors=True)
        self.delete(volume, "v1", "persistentvolumes", self.volumes)
        log.info("local-path: deleted %s and its folder %s", meta(volume).get("name", ""), path)
