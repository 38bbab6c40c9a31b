"""The apps/v1 workloads as the kit reads and writes them: Deployment, ReplicaSet, StatefulSet and
DaemonSet, with the fields the embedded API server defaults and validates (selector, replicas, pod
template, strategies). `WorkloadSpec` is what the three replicated kinds' specs share. Pure
TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import PodTemplateSpec
from runtimekit.kube.objects.meta import LabelSelector, ObjectMeta
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


class Deployment(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DeploymentSpec


class ReplicaSetSpec(TypedDict, total=False):
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec


class ReplicaSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ReplicaSetSpec


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


class StatefulSet(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: StatefulSetSpec


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
