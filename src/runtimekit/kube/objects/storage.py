"""The storage objects the kit reads and writes, typed once: PersistentVolumeClaim and PersistentVolume
(core/v1), StorageClass and CSINode (storage.k8s.io/v1), with the volume sources the scheduler's
volume filters and the embedded cluster's PV controller and provisioner read. Fields the kit never
reads are left out (`total=False`: a value may still lack any field; read with `.get`).

Pure TypedDicts over the decoded JSON; see `meta.py` for the shared parts.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import NodeSelector, ResourceList
from runtimekit.kube.objects.meta import (
    Condition,
    JsonObject,
    LabelSelector,
    ObjectMeta,
    ObjectReference,
)


class VolumeResourceRequirements(TypedDict, total=False):
    requests: ResourceList
    limits: ResourceList


class PersistentVolumeClaimSpec(TypedDict, total=False):
    accessModes: list[str]  # ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod
    selector: LabelSelector
    resources: VolumeResourceRequirements
    volumeName: str
    storageClassName: str | None
    volumeMode: str  # Filesystem (the default) or Block
    volumeAttributesClassName: str | None
    dataSource: JsonObject
    dataSourceRef: JsonObject


class PersistentVolumeClaimStatus(TypedDict, total=False):
    phase: str  # Pending, Bound, Lost
    accessModes: list[str]
    capacity: ResourceList
    conditions: list[Condition]


class PersistentVolumeClaim(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec
    status: PersistentVolumeClaimStatus


class VolumeNodeAffinity(TypedDict, total=False):
    required: NodeSelector


class CSIPersistentVolumeSource(TypedDict, total=False):
    driver: str
    volumeHandle: str
    readOnly: bool
    fsType: str
    volumeAttributes: dict[str, str]


class HostPathVolumeSource(TypedDict, total=False):
    path: str
    type: str


class LocalVolumeSource(TypedDict, total=False):
    path: str
    fsType: str


class PersistentVolumeSpec(TypedDict, total=False):
    capacity: ResourceList
    accessModes: list[str]
    claimRef: ObjectReference
    persistentVolumeReclaimPolicy: str  # Retain (the default), Delete, Recycle
    storageClassName: str
    volumeMode: str
    nodeAffinity: VolumeNodeAffinity
    mountOptions: list[str]
    # the volume source: one of these (in-tree sources the scheduler's filters read besides CSI)
    csi: CSIPersistentVolumeSource
    hostPath: HostPathVolumeSource
    local: LocalVolumeSource
    awsElasticBlockStore: JsonObject
    gcePersistentDisk: JsonObject
    azureDisk: JsonObject
    cinder: JsonObject
    rbd: JsonObject
    iscsi: JsonObject
    nfs: JsonObject


class PersistentVolumeStatus(TypedDict, total=False):
    phase: str  # Pending, Available, Bound, Released, Failed
    message: str
    reason: str
    lastPhaseTransitionTime: str


class PersistentVolume(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PersistentVolumeSpec
    status: PersistentVolumeStatus


class TopologySelectorLabelRequirement(TypedDict, total=False):
    key: str
    values: list[str]


class TopologySelectorTerm(TypedDict, total=False):
    matchLabelExpressions: list[TopologySelectorLabelRequirement]


class StorageClass(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    provisioner: str
    parameters: dict[str, str]
    reclaimPolicy: str  # Delete (the default) or Retain
    mountOptions: list[str]
    allowVolumeExpansion: bool
    volumeBindingMode: str  # Immediate (the default) or WaitForFirstConsumer
    allowedTopologies: list[TopologySelectorTerm]


class VolumeNodeResources(TypedDict, total=False):
    count: int


class CSINodeDriver(TypedDict, total=False):
    name: str
    nodeID: str
    topologyKeys: list[str]
    allocatable: VolumeNodeResources


class CSINodeSpec(TypedDict, total=False):
    drivers: list[CSINodeDriver]


class CSINode(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: CSINodeSpec
