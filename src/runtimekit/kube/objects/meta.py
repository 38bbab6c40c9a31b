"""The parts every Kubernetes object shares, typed once: `ObjectMeta` and its owner references,
`metav1.LabelSelector`, `metav1.Condition`, object references, `metav1.Status`, `DeleteOptions`,
and `KubeObject` (any object, its `spec` and `status` left open), as kopf's `RawBody`/`RawMeta`
type them.

These are `TypedDict`s over the decoded JSON (no copies, no conversion): a value the API serves is
typed where it enters (an informer, a list, a request body) and read with `.get` everywhere after,
since every field may be absent. `JsonObject` is the one type of a JSON object whose shape the code
does not know (an arbitrary resource in the API server, a patch, a CRD's spec).

`meta`, `object_key`, `labels_of` and `annotations_of` are the accessors every component reads objects
with. Pure; the lowest layer above `runtimekit.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

JsonObject = dict[str, Any]
"""A JSON object of unknown shape (what `json.loads` gives for an object)."""


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    managedFields: list[JsonObject]
    selfLink: str


ListMeta = TypedDict(
    "ListMeta",
    {"resourceVersion": str, "continue": str, "remainingItemCount": int},
    total=False,
)
"""`metav1.ListMeta` (written as a call: `continue` is a Python keyword)."""


class LabelSelectorRequirement(TypedDict, total=False):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: list[str]


class LabelSelector(TypedDict, total=False):
    """`metav1.LabelSelector`: a missing selector selects nothing, an empty one everything."""

    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


class Condition(TypedDict, total=False):
    """`metav1.Condition`, and the older per-kind conditions (PodCondition, NodeCondition, a
    Deployment's, a PodGroup's), which have the same fields and some more."""

    type: str
    status: str  # "True", "False", "Unknown"
    reason: str
    message: str
    lastTransitionTime: str
    lastProbeTime: str | None  # kubelet writes a pod condition's as null
    lastHeartbeatTime: str
    lastUpdateTime: str
    observedGeneration: int
    transitionID: str


class ObjectReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    namespace: str
    name: str
    uid: str
    resourceVersion: str
    fieldPath: str


class StatusCause(TypedDict, total=False):
    reason: str  # FieldValueInvalid, FieldValueRequired, ...
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    uid: str
    causes: list[StatusCause]
    retryAfterSeconds: int


class Status(TypedDict, total=False):
    """`metav1.Status`: the body of every refusal (the client reads its `code`, `reason` and
    `message`), and of a few successes (a binding, the delete of some kinds)."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    status: str  # Success, Failure
    message: str
    reason: str
    details: StatusDetails
    code: int


class Preconditions(TypedDict, total=False):
    uid: str
    resourceVersion: str


class DeleteOptions(TypedDict, total=False):
    """The body of a DELETE: delete only the object still at `preconditions`, its dependents how
    `propagationPolicy` (Foreground, Background, Orphan) says."""

    apiVersion: str
    kind: str
    gracePeriodSeconds: int
    preconditions: Preconditions
    propagationPolicy: str
    dryRun: list[str]


class KubeObject(TypedDict, total=False):
    """Any Kubernetes object: typed metadata, and a `spec` and `status` of a shape left open."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObject
    status: JsonObject


def meta(obj: Mapping[str, object]) -> ObjectMeta:
    """An object's metadata ({} when it has none, or none that is an object)."""
    found = obj.get("metadata")
    return cast(ObjectMeta, found) if isinstance(found, dict) else {}


def object_key(obj: Mapping[str, object]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    m = meta(obj)
    namespace = m.get("namespace")
    return f"{namespace}/{m.get('name', '')}" if namespace else str(m.get("name", ""))


def labels_of(obj: Mapping[str, object]) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, object]) -> dict[str, str]:
    return meta(obj).get("annotations") or {}
