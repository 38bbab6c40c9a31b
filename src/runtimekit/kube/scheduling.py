"""What a scheduler writes to the API server: bindings (with the assignment annotations), events
(through an `EventRecorder` when given one, else at once), the PodScheduled condition, pod deletions
for preemption, PodGroup and Queue status, the Queues Volcano always has, and the volumes and claims
its volume binding updates (a PersistentVolume's `claimRef`, a claim's selected node). Callers: the live
scheduler's cache (through its Binder interface) and server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import EventRecorder, pod_event_body
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import (
    Binding,
    Condition,
    DeleteOptions,
    PersistentVolume,
    PersistentVolumeClaim,
    PodGroupStatus,
    Queue,
    QueueStatus,
    meta,
)


class PodIdentity(Protocol):
    """What names a pod to the API server (a scheduler's task has these fields)."""

    namespace: str
    name: str
    uid: str


class KubeBinder:
    def __init__(self, http: KubeHttp, component: str, recorder: EventRecorder | None = None) -> None:
        self.http, self.component, self.recorder = http, component, recorder

    def bind(
        self, task: PodIdentity, node: str, annotations: Mapping[str, str], labels: Mapping[str, str] | None = None
    ) -> None:
        """POST pods/binding; the API server merges the annotations and sets spec.nodeName. A Binding
        carries no labels, so `labels` go first in a merge patch."""
        if labels:
            self.http.patch(
                object_path("v1", "pods", task.namespace, task.name), {"metadata": {"labels": dict(labels)}}
            )
        body: Binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": task.name, "namespace": task.namespace, "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        if task.uid:
            body["metadata"]["uid"] = task.uid
        self.http.post(object_path("v1", "pods", task.namespace, task.name, "binding"), body)

    def evict(self, task: PodIdentity, reason: str) -> None:
        options: DeleteOptions = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if task.uid:
            options["preconditions"] = {"uid": task.uid}
        try:
            self.http.delete(object_path("v1", "pods", task.namespace, task.name), options)
        except KubeError as exc:
            if exc.code not in (404, 409):
                raise
        self.event(
            task, "Normal" if reason != "preempt" else "Warning", "Preempted", f"Evicted by {self.component}: {reason}"
        )

    def event(self, task: PodIdentity, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.record(task, kind, reason, message)
            return
        body = pod_event_body(task, self.component, kind, reason, message)
        self.http.post(object_path("v1", "events", task.namespace), body)

    def report(self, task: PodIdentity, scheduled: bool, reason: str, message: str) -> None:
        self.event(task, "Normal" if scheduled else "Warning", reason, message)
        if scheduled:
            return  # the binding itself sets PodScheduled=True
        condition: Condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message[:1024],
            "lastTransitionTime": rfc3339(),
        }
        try:
            self.http.patch(
                object_path("v1", "pods", task.namespace, task.name, "status"),
                {"status": {"conditions": [condition]}},
                "strategic",
            )
        except KubeError as exc:
            if exc.code != 404:
                raise

    def update_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        path = object_path("scheduling.volcano.sh/v1beta1", "podgroups", namespace, name, "status")
        self.http.patch(path, {"status": dict(status)}, "merge")

    def update_queue(self, name: str, status: QueueStatus) -> None:
        path = object_path("scheduling.volcano.sh/v1beta1", "queues", None, name, "status")
        self.http.patch(path, {"status": dict(status)}, "merge")

    def update_volume(self, volume: PersistentVolume) -> PersistentVolume:
        """PUT a PersistentVolume (its resourceVersion a precondition); the API server's answer."""
        path = object_path("v1", "persistentvolumes", None, str(meta(volume).get("name", "")))
        return cast(PersistentVolume, self.http.put(path, dict(volume)))

    def update_claim(self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """PUT a PersistentVolumeClaim (its resourceVersion a precondition); the API server's answer."""
        claim_meta = meta(claim)
        path = object_path(
            "v1", "persistentvolumeclaims", str(claim_meta.get("namespace", "")), str(claim_meta.get("name", ""))
        )
        return cast(PersistentVolumeClaim, self.http.put(path, dict(claim)))

    def ensure_queue(self, manifest: Queue) -> bool:
        """Create a Queue unless it exists; False when the API server does not serve Queues."""
        try:
            self.http.post(object_path("scheduling.volcano.sh/v1beta1", "queues"), dict(manifest))
        except KubeError as exc:
            if exc.code == 404:
                return False
            if exc.code != 409:
                raise
        return True
