"""Volcano's scheduling objects (`scheduling.volcano.sh/v1beta1`) as the kit reads and writes them:
PodGroup and Queue. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.core import ResourceList
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
