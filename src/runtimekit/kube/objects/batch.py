"""The batch/v1 Job and CronJob as the kit reads and writes them: the node controller's runtime switch
runs in a Job, and the embedded cluster runs both. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import PodTemplateSpec
from runtimekit.kube.objects.meta import Condition, LabelSelector, ObjectMeta, ObjectReference


class JobSpec(TypedDict, total=False):
    parallelism: int
    completions: int
    completionMode: str  # NonIndexed, Indexed
    backoffLimit: int
    activeDeadlineSeconds: int
    ttlSecondsAfterFinished: int
    suspend: bool
    manualSelector: bool
    selector: LabelSelector
    template: PodTemplateSpec


class JobStatus(TypedDict, total=False):
    conditions: list[Condition]  # Complete, Failed, Suspended, FailureTarget, SuccessCriteriaMet
    startTime: str
    completionTime: str
    active: int
    ready: int
    succeeded: int
    failed: int
    terminating: int


class Job(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus


class JobTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSpec


class CronJobSpec(TypedDict, total=False):
    schedule: str
    timeZone: str
    startingDeadlineSeconds: int
    concurrencyPolicy: str  # Allow, Forbid, Replace
    suspend: bool
    jobTemplate: JobTemplateSpec
    successfulJobsHistoryLimit: int
    failedJobsHistoryLimit: int


class CronJobStatus(TypedDict, total=False):
    active: list[ObjectReference]
    lastScheduleTime: str
    lastSuccessfulTime: str


class CronJob(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: CronJobSpec
    status: CronJobStatus
