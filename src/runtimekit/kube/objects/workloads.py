"""The apps/v1 workloads as the kit reads and writes them: Deployment, ReplicaSet, StatefulSet and
DaemonSet, with the fields the embedded API server defaults and validates (selector, replicas, pod
template, strategies), the statuses the embedded cluster's workload controllers write, and the
ControllerRevision a StatefulSet records its templates in. `WorkloadSpec` is what the three
replicated kinds' specs share. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import PodTemplateSpec
from runtimekit.kube.objects.meta import Condition, JsonObject, KubeObject, LabelSelector, ObjectMeta
from runtimekit.kube.objects.policy import IntOrString


class WorkloadSpec(TypedDict, total=False):
    """The spec fields a Deployment, ReplicaSet and StatefulSet share (each spec below has them)."""

    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec


class RollingUpdateDeployment(TypedDict, total=False):
    maxSurge: IntOrString
    maxUnavailable: IntOrString


class DeploymentStrategy(TypedDict, total=False):
    type: str  # RollingUpdate, Recreate
    rollingUpdate: RollingUpdateDeployment


class DeploymentSpec(TypedDict, total=False):
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec
    strategy: DeploymentStrategy
    revisionHistoryLimit: int
    progressDeadlineSeconds: int
    minReadySeconds: int
    paused: bool


class DeploymentStatus(TypedDict, total=False):
    observedGeneration: int
    replicas: int
    updatedReplicas: int
    readyReplicas: int
    availableReplicas: int
    unavailableReplicas: int
    collisionCount: int
    conditions: list[Condition]  # Available, Progressing, ReplicaFailure


class Deployment(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DeploymentSpec
    status: DeploymentStatus


class ReplicaSetSpec(TypedDict, total=False):
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec
    minReadySeconds: int


class ReplicaSetStatus(TypedDict, total=False):
    replicas: int
    fullyLabeledReplicas: int
    readyReplicas: int
    availableReplicas: int
    observedGeneration: int
    conditions: list[Condition]  # ReplicaFailure


class ReplicaSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ReplicaSetSpec
    status: ReplicaSetStatus


class RollingUpdateStatefulSetStrategy(TypedDict, total=False):
    partition: int
    maxUnavailable: IntOrString


class StatefulSetUpdateStrategy(TypedDict, total=False):
    type: str  # RollingUpdate, OnDelete
    rollingUpdate: RollingUpdateStatefulSetStrategy


class StatefulSetPersistentVolumeClaimRetentionPolicy(TypedDict, total=False):
    whenDeleted: str  # Retain, Delete
    whenScaled: str


class StatefulSetSpec(TypedDict, total=False):
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec
    podManagementPolicy: str  # OrderedReady, Parallel
    updateStrategy: StatefulSetUpdateStrategy
    revisionHistoryLimit: int
    persistentVolumeClaimRetentionPolicy: StatefulSetPersistentVolumeClaimRetentionPolicy
    serviceName: str
    minReadySeconds: int
    volumeClaimTemplates: list[KubeObject]  # PersistentVolumeClaims: metadata and a PVC spec


class StatefulSetStatus(TypedDict, total=False):
    observedGeneration: int
    replicas: int
    readyReplicas: int
    currentReplicas: int
    updatedReplicas: int
    availableReplicas: int
    currentRevision: str
    updateRevision: str
    collisionCount: int
    conditions: list[Condition]


class StatefulSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: StatefulSetSpec
    status: StatefulSetStatus


class RollingUpdateDaemonSet(TypedDict, total=False):
    maxUnavailable: IntOrString
    maxSurge: IntOrString


class DaemonSetUpdateStrategy(TypedDict, total=False):
    type: str  # RollingUpdate, OnDelete
    rollingUpdate: RollingUpdateDaemonSet


class DaemonSetSpec(TypedDict, total=False):
    selector: LabelSelector
    template: PodTemplateSpec
    updateStrategy: DaemonSetUpdateStrategy
    revisionHistoryLimit: int


class DaemonSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DaemonSetSpec


class ControllerRevision(TypedDict, total=False):
    """A template a StatefulSet (or DaemonSet) had, numbered: `data` is the patch that restores it
    (`{"spec": {"template": {..., "$patch": "replace"}}}`), `revision` its number."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    data: JsonObject
    revision: int
