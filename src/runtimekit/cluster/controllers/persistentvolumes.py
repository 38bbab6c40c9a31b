"""The PersistentVolume controller, as kube-controller-manager's (`pv_controller.go`): it binds
claims to volumes and moves both through their phases.

Per claim (level-based; key `claim:<namespace>/<name>`):
- not bound yet (no `pv.kubernetes.io/bind-completed`): a claim naming no volume takes the volume
  `FindMatchingVolume` finds (kube.semantics.volumes); a claim whose class waits for its first
  consumer only takes one pre-bound to it, until the scheduler gives it a node
  (`volume.kubernetes.io/selected-node`: `WaitForFirstConsumer` Event meanwhile). With no volume,
  a claim of a class is left to the class's provisioner (the storage-provisioner annotations,
  `ExternalProvisioning` Event), one without a class waits (`FailedBinding`); it stays Pending. A
  claim naming its volume (pre-bound) is bound to it when the volume is free or its own.
- binding: the volume gets the claim's `claimRef` (and `pv.kubernetes.io/bound-by-controller` when
  the controller chose it) and phase Bound; the claim gets `volumeName`, `bind-completed` (and
  `bound-by-controller`), phase Bound, the volume's access modes and capacity.
- bound: a claim whose volume is gone, or names it no more, is Lost (`ClaimLost`); one whose volume
  is bound to another claim is Lost (`ClaimMisbound`).
Per volume (key `volume:<name>`): without a claim it is Available; bound to a claim that is gone (or
a new claim of the same name) it is Released and reclaimed by its policy: Retain keeps it, Delete
leaves a provisioned volume to its provisioner (which deletes it) and fails any other
(`VolumeFailedDelete`: no deleter here); a claim bound to another volume unbinds a volume the
controller had bound. Events are written once per object and reason.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from runtimekit.cluster.controllers.base import Controller, path_of
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Change, Informers, ObjectCache
from runtimekit.kube.objects import (
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimStatus,
    StorageClass,
    annotations_of,
    meta,
    object_key,
)
from runtimekit.kube.semantics.labels import SelectorError
from runtimekit.kube.semantics.volumes import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    ClassError,
    bind_volume_to_claim,
    claim_class,
    find_matching_volume,
    is_delay_binding,
    is_volume_bound_to_claim,
)

CLAIMS_PATH = "/api/v1/persistentvolumeclaims"
VOLUMES_PATH = "/api/v1/persistentvolumes"
CLASSES_PATH = "/apis/storage.k8s.io/v1/storageclasses"
CLAIM, VOLUME = "claim:", "volume:"


class PersistentVolumeController(Controller):
    """See the module docstring."""

    name = "persistentvolume-binder-controller"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self.claims: ObjectCache[PersistentVolumeClaim] = self.watch(
            CLAIMS_PATH, PersistentVolumeClaim, self._on_claim
        ).cache
        self.volumes: ObjectCache[PersistentVolume] = self.watch(VOLUMES_PATH, PersistentVolume, self._on_volume).cache
        self.classes: ObjectCache[StorageClass] = self.watch(CLASSES_PATH, StorageClass, self._on_class).cache
        self._told: set[tuple[str, str, str]] = set()  # (uid, reason, message) already recorded
        self._told_lock = threading.Lock()

    # -- what to sync --------------------------------------------------------------------------
    def _on_claim(self, change: Change[PersistentVolumeClaim]) -> None:
        self.queue.add(CLAIM + object_key(change.obj))
        volume = str((change.obj.get("spec") or {}).get("volumeName") or "")
        if volume:
            self.queue.add(VOLUME + volume)
        if change.new is None:  # the volumes bound to it are released
            for candidate in self.volumes.items():
                ref = (candidate.get("spec") or {}).get("claimRef") or {}
                if f"{ref.get('namespace', '')}/{ref.get('name', '')}" == object_key(change.obj):
                    self.queue.add(VOLUME + object_key(candidate))

    def _on_volume(self, change: Change[PersistentVolume]) -> None:
        self.queue.add(VOLUME + object_key(change.obj))
        ref = (change.obj.get("spec") or {}).get("claimRef") or {}
        if ref.get("name"):
            self.queue.add(f"{CLAIM}{ref.get('namespace', '')}/{ref.get('name', '')}")
        if change.old is None or (change.obj.get("status") or {}).get("phase") == "Available":
            # a new or freed volume may be the one a claim waits for: any unbound claim, and a claim
            # pre-bound to it by name that was synced before the volume reached this controller
            # (kube's controller finds those on its periodic resync)
            name = object_key(change.obj)
            for claim in self.claims.items():
                wanted = (claim.get("spec") or {}).get("volumeName")
                if not wanted or (wanted == name and ANN_BIND_COMPLETED not in annotations_of(claim)):
                    self.queue.add(CLAIM + object_key(claim))

    def _on_class(self, change: Change[StorageClass]) -> None:
        for claim in self.claims.items():
            if claim_class(claim) == object_key(change.obj) and not (claim.get("spec") or {}).get("volumeName"):
                self.queue.add(CLAIM + object_key(claim))

    def sync(self, key: str) -> None:
        if key.startswith(CLAIM):
            claim = self.claims.get(key[len(CLAIM) :])
            if claim is not None:
                self._sync_claim(claim)
        elif key.startswith(VOLUME):
            volume = self.volumes.get(key[len(VOLUME) :])
            if volume is not None:
                self._sync_volume(volume)

    # -- claims --------------------------------------------------------------------------------
    def _sync_claim(self, claim: PersistentVolumeClaim) -> None:
        if ANN_BIND_COMPLETED in annotations_of(claim):
            self._sync_bound_claim(claim)
        elif (claim.get("spec") or {}).get("volumeName"):
            self._sync_prebound_claim(claim)
        else:
            self._sync_unbound_claim(claim)

    def _sync_unbound_claim(self, claim: PersistentVolumeClaim) -> None:
        try:
            delay = is_delay_binding(claim, self.classes.get)
            volume = find_matching_volume(claim, self.volumes.items(), None, None, delay)
        except (ClassError, SelectorError) as exc:
            self._tell(claim, "PersistentVolumeClaim", "Warning", "ProvisioningFailed", str(exc))
            self._claim_phase(claim, "Pending")
            return
        if volume is not None:
            self._bind(volume, claim)
            return
        if delay and ANN_SELECTED_NODE not in annotations_of(claim):
            message = "waiting for first consumer to be created before binding"
            self._tell(claim, "PersistentVolumeClaim", "Normal", "WaitForFirstConsumer", message)
        elif claim_class(claim):
            self._provision(claim)
        else:
            message = "no persistent volumes available for this claim and no storage class is set"
            self._tell(claim, "PersistentVolumeClaim", "Normal", "FailedBinding", message)
        self._claim_phase(claim, "Pending")

    def _provision(self, claim: PersistentVolumeClaim) -> None:
        """Leave the claim to its class's provisioner: say which one on the claim (kube's external
        provisioning; the embedded cluster has no in-tree provisioner)."""
        name = claim_class(claim)
        found = self.classes.get(name)
        if found is None:
            message = f'storageclass.storage.k8s.io "{name}" not found'
            self._tell(claim, "PersistentVolumeClaim", "Warning", "ProvisioningFailed", message)
            return
        provisioner = str(found.get("provisioner") or "")
        annotations = annotations_of(claim)
        if annotations.get(ANN_STORAGE_PROVISIONER) != provisioner:
            patch = {"annotations": {ANN_STORAGE_PROVISIONER: provisioner, ANN_BETA_STORAGE_PROVISIONER: provisioner}}
            claim = self.patch_meta(claim, "v1", "persistentvolumeclaims", patch, self.claims)
        message = (
            f'Waiting for a volume to be created either by the external provisioner "{provisioner}" or '
            "manually by the system administrator. If volume creation is delayed, please verify that the "
            "provisioner is running and correctly registered."
        )
        self._tell(claim, "PersistentVolumeClaim", "Normal", "ExternalProvisioning", message)

    def _sync_prebound_claim(self, claim: PersistentVolumeClaim) -> None:
        name = str((claim.get("spec") or {}).get("volumeName"))
        volume = self.volumes.get(name)
        if volume is not None and (
            not (volume.get("spec") or {}).get("claimRef") or is_volume_bound_to_claim(volume, claim)
        ):
            self._bind(volume, claim)
            return
        if volume is not None:
            message = f'volume "{name}" already bound to a different claim.'
            self._tell(claim, "PersistentVolumeClaim", "Warning", "FailedBinding", message)
        self._claim_phase(claim, "Pending")

    def _sync_bound_claim(self, claim: PersistentVolumeClaim) -> None:
        name = str((claim.get("spec") or {}).get("volumeName") or "")
        volume = self.volumes.get(name) if name else None
        if volume is None:
            message = (
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
                if not name
                else "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
            )
            self._tell(claim, "PersistentVolumeClaim", "Warning", "ClaimLost", message)
            self._claim_phase(claim, "Lost")
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or is_volume_bound_to_claim(volume, claim):
            self._bind(volume, claim)
            return
        message = "Two claims are bound to the same volume, this one is bound incorrectly"
        self._tell(claim, "PersistentVolumeClaim", "Warning", "ClaimMisbound", message)
        self._claim_phase(claim, "Lost")

    # -- binding -------------------------------------------------------------------------------
    def _bind(self, volume: PersistentVolume, claim: PersistentVolumeClaim) -> None:
        """Both ends of a binding, in kube's order: the volume's claimRef, its phase, the claim's
        volume name and annotations, its status (each write only when something changes)."""
        bound, dirty = bind_volume_to_claim(volume, claim)
        if dirty:
            volume = self._update(bound, "persistentvolumes", self.volumes)
        if (volume.get("status") or {}).get("phase") != "Bound":
            volume = self.put_status(volume, "v1", "persistentvolumes", {"phase": "Bound"}, self.volumes)
        name = str(meta(volume).get("name", ""))
        spec = claim.get("spec") or {}
        annotations = annotations_of(claim)
        if spec.get("volumeName") != name or ANN_BIND_COMPLETED not in annotations:
            updated = cast(PersistentVolumeClaim, {**claim, "spec": {**spec, "volumeName": name}})
            notes = dict(annotations)
            notes[ANN_BIND_COMPLETED] = "yes"
            if spec.get("volumeName") != name:  # the controller chose the volume
                notes[ANN_BOUND_BY_CONTROLLER] = "yes"
            updated["metadata"] = {**meta(claim), "annotations": notes}
            claim = self._update(updated, "persistentvolumeclaims", self.claims)
        status: PersistentVolumeClaimStatus = {
            "phase": "Bound",
            "accessModes": list((volume.get("spec") or {}).get("accessModes") or []),
            "capacity": dict((volume.get("spec") or {}).get("capacity") or {}),
        }
        if {k: (claim.get("status") or {}).get(k) for k in status} != status:
            self.put_status(
                claim, "v1", "persistentvolumeclaims", {**(claim.get("status") or {}), **status}, self.claims
            )

    # -- volumes -------------------------------------------------------------------------------
    def _sync_volume(self, volume: PersistentVolume) -> None:
        if meta(volume).get("deletionTimestamp"):
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):  # free, or pre-bound by its author to a claim to come
            self._volume_phase(volume, "Available")
            return
        claim = self.claims.get(f"{ref.get('namespace', '')}/{ref.get('name', '')}")
        if claim is None or meta(claim).get("uid") != ref.get("uid"):
            self._release(volume)
            return
        bound_to = (claim.get("spec") or {}).get("volumeName")
        if not bound_to:  # the claim's sync finishes the binding
            self.queue.add(CLAIM + object_key(claim))
        elif bound_to == meta(volume).get("name"):
            self._volume_phase(volume, "Bound")
        elif ANN_BOUND_BY_CONTROLLER in annotations_of(volume):  # the claim took another volume
            unbound = cast(
                PersistentVolume,
                {**volume, "spec": {k: v for k, v in (volume.get("spec") or {}).items() if k != "claimRef"}},
            )
            notes = {k: v for k, v in annotations_of(volume).items() if k != ANN_BOUND_BY_CONTROLLER}
            unbound["metadata"] = {**meta(volume), "annotations": notes}
            self._volume_phase(self._update(unbound, "persistentvolumes", self.volumes), "Available")

    def _release(self, volume: PersistentVolume) -> None:
        """The volume's claim is gone: Released, then reclaimed by its policy."""
        phase = (volume.get("status") or {}).get("phase")
        if phase not in ("Released", "Failed"):
            volume = self._volume_phase(volume, "Released")
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy != "Delete" or phase == "Failed":
            return
        if annotations_of(volume).get(ANN_DYNAMICALLY_PROVISIONED):
            return  # its provisioner deletes it
        name = meta(volume).get("name", "")
        message = f'error getting deleter volume plugin for volume "{name}": no deletable volume plugin matched'
        self._tell(volume, "PersistentVolume", "Warning", "VolumeFailedDelete", message)
        self._volume_phase(volume, "Failed", message)

    # -- writes --------------------------------------------------------------------------------
    def _update(self, obj: Any, plural: str, cache: ObjectCache[Any]) -> Any:
        """PUT the object (its resourceVersion a precondition: a conflict retries the sync)."""
        updated = self.http.put(path_of("v1", plural, obj), obj)
        cache.written(updated)
        return updated

    def _volume_phase(self, volume: PersistentVolume, phase: str, message: str = "") -> PersistentVolume:
        status = volume.get("status") or {}
        if status.get("phase") == phase:
            return volume
        new_status: dict[str, Any] = {"phase": phase}
        if message:
            new_status["message"] = message
        return self.put_status(volume, "v1", "persistentvolumes", new_status, self.volumes)

    def _claim_phase(self, claim: PersistentVolumeClaim, phase: str) -> None:
        if (claim.get("status") or {}).get("phase") != phase:
            self.put_status(
                claim, "v1", "persistentvolumeclaims", {**(claim.get("status") or {}), "phase": phase}, self.claims
            )

    def _tell(self, obj: Any, kind: str, type_: str, reason: str, message: str) -> None:
        """An Event, once per object, reason and message (kube's recorder would count repeats)."""
        told = (str(meta(obj).get("uid", "")), reason, message)
        with self._told_lock:
            if told in self._told:
                return
            if len(self._told) > 10_000:
                self._told.clear()
            self._told.add(told)
        try:
            self.event(obj, "v1", kind, type_, reason, message)
        except KubeError:
            with self._told_lock:
                self._told.discard(told)
