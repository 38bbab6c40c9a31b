"""The batch/v1 Job as the kit reads and writes it: the node controller's runtime switch runs in one,
and the embedded cluster runs them. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import PodTemplateSpec
from runtimekit.kube.objects.meta import Condition, LabelSelector, ObjectMeta


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
