"""The ReplicaSet controller, as kube's: keep `spec.replicas` active pods from the template.

Per ReplicaSet, level-based:
- claims the active pods of its namespace: adopts orphans its selector matches, releases pods it
  owns that no longer match (kube's ClaimPods);
- creates missing pods (`generateName: <rs>-`, the template's labels and annotations, a controller
  reference) in slow-start batches of 1, 2, 4, ... (a failing batch stops the rest), at most 500 per
  sync; deletes surplus pods in kube's order (unscheduled, pending, not ready, doubled up on a node,
  ready for the shortest time, most restarts, newest first);
- writes `status`: `replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` (ready
  for `minReadySeconds`), `observedGeneration`, and a `ReplicaFailure` condition (`FailedCreate` /
  `FailedDelete`) while creating or deleting fails; Events `SuccessfulCreate`, `SuccessfulDelete`,
  `FailedCreate`.
A ReplicaSet being deleted only gets its status written (the garbage collector takes its pods).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.pods import (
    deletion_order,
    is_active,
    is_available,
    is_ready,
    is_terminating,
    name_of,
    owner_key,
    owner_ref,
    pod_from_template,
)
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Change, Informers
from runtimekit.kube.objects import Condition, Pod, ReplicaSet, ReplicaSetStatus, labels_of, meta, object_key
from runtimekit.kube.semantics.labels import label_selector_or_nothing

log = logging.getLogger(__name__)
RS_PATH = "/apis/apps/v1/replicasets"
PODS_PATH = "/api/v1/pods"
BURST = 500  # kube's burstReplicas: pods created or deleted per sync at most


class ReplicaSetController(Controller):
    """See the module docstring."""

    name = "replicaset-controller"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self.sets = self.watch(RS_PATH, ReplicaSet, self._on_set).cache
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache

    def _on_set(self, change: Change[ReplicaSet]) -> None:
        self.queue.add(object_key(change.obj))

    def _on_pod(self, change: Change[Pod]) -> None:
        for pod in (change.old, change.new):
            if pod is None:
                continue
            owner = owner_key(pod, "ReplicaSet")
            if owner:
                self.queue.add(owner)
            elif change.new is not None:  # an orphan: whoever selects it may adopt it
                namespace = str(meta(pod).get("namespace", ""))
                for rs in self.sets.items(namespace):
                    if label_selector_or_nothing((rs.get("spec") or {}).get("selector")).matches(labels_of(pod)):
                        self.queue.add(object_key(rs))

    # -- sync ---------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        rs = self.sets.get(key)
        if rs is None:
            return
        spec = rs.get("spec") or {}
        namespace = str(meta(rs).get("namespace", ""))
        candidates = [p for p in self.pods.items(namespace) if is_active(p)]
        ref = owner_ref(rs, "apps/v1", "ReplicaSet")
        pods = self.claim(rs, ref, spec.get("selector"), candidates, ("v1", "pods", self.pods))
        failure = ""
        if not is_terminating(rs):
            try:
                pods = self._manage(rs, pods)
            except KubeError as exc:
                failure = str(exc)
        self._write_status(rs, pods, failure)
        if failure:
            raise KubeError(failure, 500, "ManageReplicasFailed")

    def _manage(self, rs: ReplicaSet, pods: list[Pod]) -> list[Pod]:
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        diff = len(pods) - wanted
        if diff < 0:
            return pods + self._create(rs, min(-diff, BURST))
        if diff > 0:
            doomed = deletion_order(pods)[: min(diff, BURST)]
            for pod in doomed:
                self.delete(pod, "v1", "pods", self.pods)
                self.event(rs, "apps/v1", "ReplicaSet", "Normal", "SuccessfulDelete", f"Deleted pod: {name_of(pod)}")
            gone = {id(p) for p in doomed}
            return [p for p in pods if id(p) not in gone]
        return pods

    def _create(self, rs: ReplicaSet, count: int) -> list[Pod]:
        template = (rs.get("spec") or {}).get("template") or {}
        ref = owner_ref(rs, "apps/v1", "ReplicaSet")
        namespace = str(meta(rs).get("namespace", ""))
        made: list[Pod] = []
        batch = 1
        while len(made) < count:
            for _ in range(min(batch, count - len(made))):
                body = pod_from_template(template, ref, namespace, generate_name=f"{name_of(rs)}-")
                try:
                    pod = self.create("v1", "pods", body, self.pods)
                except KubeError as exc:
                    self.event(rs, "apps/v1", "ReplicaSet", "Warning", "FailedCreate", f"Error creating: {exc}")
                    raise
                made.append(pod)
                self.event(rs, "apps/v1", "ReplicaSet", "Normal", "SuccessfulCreate", f"Created pod: {name_of(pod)}")
            batch *= 2
        return made

    def _write_status(self, rs: ReplicaSet, pods: list[Pod], failure: str) -> None:
        spec, old = rs.get("spec") or {}, rs.get("status") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        now = self.clock()
        min_ready = int(spec.get("minReadySeconds") or 0)
        status: ReplicaSetStatus = {
            "replicas": len(pods),
            "fullyLabeledReplicas": sum(1 for p in pods if _has_labels(p, template_labels)),
            "readyReplicas": sum(1 for p in pods if is_ready(p)),
            "availableReplicas": sum(1 for p in pods if is_available(p, min_ready, now)),
            "observedGeneration": int(meta(rs).get("generation") or 0),
        }
        conditions = [c for c in old.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
        current = next((c for c in old.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None)
        if failure:
            reason = "FailedCreate" if len(pods) < int(spec.get("replicas", 1)) else "FailedDelete"
            conditions.append(current or _failure(reason, failure, now))
        if conditions:
            status["conditions"] = conditions
        if status != old:
            self.put_status(rs, "apps/v1", "replicasets", status, self.sets)
        if min_ready and status["readyReplicas"] == spec.get("replicas", 1) != status["availableReplicas"]:
            self.requeue_after(object_key(rs), min_ready)


def _has_labels(pod: Pod, labels: Mapping[str, str]) -> bool:
    have = meta(pod).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())


def _failure(reason: str, message: str, now: float) -> Condition:
    stamp = rfc3339(now)
    return {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
