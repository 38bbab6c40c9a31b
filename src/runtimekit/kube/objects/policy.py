"""Policy objects the scheduler reads: PodDisruptionBudget (policy/v1), ResourceQuota (core/v1) and
PriorityClass (scheduling.k8s.io/v1). Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import ResourceList
from runtimekit.kube.objects.meta import Condition, LabelSelector, ObjectMeta

IntOrString = int | str
"""`intstr.IntOrString`: a count, or a percentage such as `"25%"` (`kube.semantics.intstr` reads it)."""


class PodDisruptionBudgetSpec(TypedDict, total=False):
    selector: LabelSelector
    minAvailable: IntOrString
    maxUnavailable: IntOrString
    unhealthyPodEvictionPolicy: str


class PodDisruptionBudgetStatus(TypedDict, total=False):
    observedGeneration: int
    disruptionsAllowed: int
    currentHealthy: int
    desiredHealthy: int
    expectedPods: int
    disruptedPods: dict[str, str]
    conditions: list[Condition]


class PodDisruptionBudget(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus


class ResourceQuotaSpec(TypedDict, total=False):
    hard: ResourceList
    scopes: list[str]


class ResourceQuotaStatus(TypedDict, total=False):
    hard: ResourceList
    used: ResourceList


class ResourceQuota(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ResourceQuotaSpec
    status: ResourceQuotaStatus


class PriorityClass(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    value: int
    globalDefault: bool
    preemptionPolicy: str
    description: str
