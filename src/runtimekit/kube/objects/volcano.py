"""Volcano's objects as the kit reads and writes them: PodGroup and Queue
(`scheduling.volcano.sh/v1beta1`), and the Job (`batch.volcano.sh/v1alpha1`, `VolcanoJob` here: batch/v1
has a Job too) with its tasks and lifecycle policies. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import PodTemplateSpec, ResourceList
from runtimekit.kube.objects.meta import Condition, JsonObject, ObjectMeta


class PodGroupSpec(TypedDict, total=False):
    minMember: int
    minTaskMember: dict[str, int]
    queue: str
    priorityClassName: str
    minResources: ResourceList
    networkTopology: JsonObject


class PodGroupStatus(TypedDict, total=False):
    phase: str  # Pending, Inqueue, Running, Unknown, Completed
    conditions: list[Condition]
    running: int
    succeeded: int
    failed: int


class PodGroup(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodGroupSpec
    status: PodGroupStatus


class QueueSpec(TypedDict, total=False):
    weight: int
    capability: ResourceList
    deserved: ResourceList
    guarantee: JsonObject  # {resource: ResourceList}
    reclaimable: bool
    parent: str
    priority: int


class QueueStatus(TypedDict, total=False):
    state: str  # Open, Closed, Closing, Unknown
    pending: int
    inqueue: int
    running: int
    completed: int
    unknown: int
    allocated: ResourceList
    reservation: JsonObject


class Queue(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: QueueSpec
    status: QueueStatus


class LifecyclePolicy(TypedDict, total=False):
    """What a Job does (`action`) on an event, or on a container's exit code."""

    action: str  # AbortJob, RestartJob, RestartTask, RestartPod, TerminateJob, CompleteJob, ...
    event: str
    events: list[str]  # PodFailed, PodEvicted, TaskCompleted, ... or "*"
    exitCode: int
    timeout: str


class TaskSpec(TypedDict, total=False):
    name: str
    replicas: int
    minAvailable: int
    maxRetry: int
    policies: list[LifecyclePolicy]
    template: PodTemplateSpec


class VolcanoJobSpec(TypedDict, total=False):
    schedulerName: str
    queue: str
    minAvailable: int
    maxRetry: int
    priorityClassName: str
    tasks: list[TaskSpec]
    policies: list[LifecyclePolicy]
    plugins: dict[str, list[str]]  # job plugin -> its arguments


class VolcanoJob(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VolcanoJobSpec
    status: JsonObject
