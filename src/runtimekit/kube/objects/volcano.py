"""Volcano's objects as the kit reads and writes them: PodGroup and Queue
(`scheduling.volcano.sh/v1beta1`), and the Job (`batch.volcano.sh/v1alpha1`, `VolcanoJob` here: batch/v1
has a Job too) with its tasks, lifecycle policies, volumes and status. Pure TypedDicts; see `meta.py`.
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


class DependsOn(TypedDict, total=False):
    """The tasks a task waits for: all of them, or any one with `iteration: any`."""

    name: list[str]
    iteration: str  # any, all


class TaskSpec(TypedDict, total=False):
    name: str
    replicas: int
    minAvailable: int
    maxRetry: int
    policies: list[LifecyclePolicy]
    template: PodTemplateSpec
    dependsOn: DependsOn


class VolumeSpec(TypedDict, total=False):
    """A claim every pod of a Job mounts: a named PVC, or one the controller makes from `volumeClaim`."""

    mountPath: str
    volumeClaimName: str
    volumeClaim: JsonObject  # a PersistentVolumeClaimSpec


class VolcanoJobSpec(TypedDict, total=False):
    schedulerName: str
    queue: str
    minAvailable: int
    minSuccess: int
    maxRetry: int
    priorityClassName: str
    tasks: list[TaskSpec]
    volumes: list[VolumeSpec]
    policies: list[LifecyclePolicy]
    plugins: dict[str, list[str]]  # job plugin -> its arguments


class VolcanoJobState(TypedDict, total=False):
    phase: str  # Pending, Running, Restarting, Completing, Completed, Aborting, Aborted, Terminating, ...
    reason: str
    message: str
    lastTransitionTime: str


class TaskState(TypedDict, total=False):
    phase: dict[str, int]  # pod phase -> how many of the task's pods are in it


class VolcanoJobStatus(TypedDict, total=False):
    state: VolcanoJobState
    minAvailable: int
    pending: int
    running: int
    succeeded: int
    failed: int
    terminating: int
    unknown: int
    version: int  # goes up when the job's pods are killed: events of older pods no longer count
    retryCount: int
    runningDuration: str
    taskStatusCount: dict[str, TaskState]
    conditions: list[Condition]  # a JobCondition: `status` is the phase entered
    controlledResources: dict[str, str]


class VolcanoJob(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VolcanoJobSpec
    status: VolcanoJobStatus
