"""The StatefulSet controller, as kube's: pods with stable names, created and removed in order.

Per StatefulSet, level-based:
- revisions: the template is recorded in a ControllerRevision (`revisions.py`); `status.updateRevision`
  is the one of the current template, `currentRevision` the one the set was at before (it becomes the
  update revision once every pod runs it, ready);
- pods `<set>-<ordinal>` for ordinals `0 .. replicas-1`, each with the template of its revision
  (ordinals under the `partition` stay at the current revision), labels
  `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`, `controller-revision-hash`,
  `hostname` = its name, `subdomain` = `serviceName`, and a PVC `<claim>-<pod>` per
  `volumeClaimTemplates` entry (created first, never deleted here);
- `OrderedReady` (the default): a pod is created only once every lower ordinal is Running and Ready,
  one at a time; scale-down deletes the highest ordinal first, one at a time, each after the
  terminating one is gone; `Parallel` creates and deletes without waiting;
- a Failed or Succeeded pod is deleted and created again (`RecreatingFailedPod`);
- `RollingUpdate`: once all pods are Running and Ready, the highest ordinal (at or above `partition`)
  not at the update revision is deleted, then re-created at the update revision, one at a time;
  `OnDelete`: only deleted pods come back updated;
- status: `replicas`, `readyReplicas`, `currentReplicas`, `updatedReplicas`, `availableReplicas`
  (ready for `minReadySeconds`), `currentRevision`, `updateRevision`, `collisionCount`,
  `observedGeneration` — what `kubectl rollout status statefulset` reads.
Events `SuccessfulCreate` ("create Pod web-0 in StatefulSet web successful"), `SuccessfulDelete`,
`RecreatingFailedPod`. A set being deleted only gets its status written.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Sequence
from typing import cast

from runtimekit.cluster.controllers import revisions
from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.pods import (
    FINISHED,
    is_available,
    is_running_and_ready,
    is_terminating,
    name_of,
    owner_key,
    owner_ref,
    phase,
    pod_from_template,
)
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import BY_CONTROLLER, Change, Informers
from runtimekit.kube.objects import (
    ControllerRevision,
    KubeObject,
    Pod,
    StatefulSet,
    StatefulSetStatus,
    Volume,
    labels_of,
    meta,
    object_key,
)
from runtimekit.kube.semantics.labels import label_selector_or_nothing

log = logging.getLogger(__name__)
STS_PATH = "/apis/apps/v1/statefulsets"
PODS_PATH = "/api/v1/pods"
REVISIONS_PATH = "/apis/apps/v1/controllerrevisions"
PVC_PATH = "/api/v1/persistentvolumeclaims"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
_ORDINAL = re.compile(r"^(.*)-(\d+)$")


def ordinal(pod: Pod, set_name: str) -> int:
    """The pod's ordinal in the set named `set_name`, -1 when it is not a member by name."""
    match = _ORDINAL.match(name_of(pod))
    return int(match.group(2)) if match and match.group(1) == set_name else -1


def _revision_of(pod: Pod) -> str:
    return labels_of(pod).get(REVISION_LABEL, "")


def _healthy(pod: Pod) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


class StatefulSetController(Controller):
    """See the module docstring."""

    name = "statefulset-controller"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self.sets = self.watch(STS_PATH, StatefulSet, lambda change: self.queue.add(object_key(change.obj))).cache
        self.pods = self.watch(PODS_PATH, Pod, self._on_owned).cache
        self.revisions = self.watch(REVISIONS_PATH, ControllerRevision, self._on_owned).cache
        self.claims = self.watch(PVC_PATH, KubeObject, lambda change: None).cache

    def _on_owned(self, change: Change[Pod] | Change[ControllerRevision]) -> None:
        for obj in (change.old, change.new):
            if obj is None:
                continue
            owner = owner_key(obj, "StatefulSet")
            if owner:
                self.queue.add(owner)
            elif change.new is not None:
                for sts in self.sets.items(str(meta(obj).get("namespace", ""))):
                    if label_selector_or_nothing((sts.get("spec") or {}).get("selector")).matches(labels_of(obj)):
                        self.queue.add(object_key(sts))

    # -- sync ---------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        sts = self.sets.get(key)
        if sts is None:
            return
        spec, namespace = sts.get("spec") or {}, str(meta(sts).get("namespace", ""))
        ref = owner_ref(sts, "apps/v1", "StatefulSet")
        members = [p for p in self.pods.items(namespace) if ordinal(p, name_of(sts)) >= 0]
        pods = self.claim(sts, ref, spec.get("selector"), members, ("v1", "pods", self.pods))
        history = self.revisions.by_index(BY_CONTROLLER, str(meta(sts).get("uid", "")))
        current, update = self._revisions(sts, history)
        if not is_terminating(sts):
            self._update(sts, current, update, pods)
        pods = [
            p for p in self.pods.by_index(BY_CONTROLLER, str(meta(sts).get("uid", ""))) if ordinal(p, name_of(sts)) >= 0
        ]
        self._write_status(sts, current, update, pods)
        self._truncate(sts, current, update, pods)

    def _revisions(
        self, sts: StatefulSet, history: Sequence[ControllerRevision]
    ) -> tuple[ControllerRevision, ControllerRevision]:
        collisions = int((sts.get("status") or {}).get("collisionCount") or 0)
        plan = revisions.next_revisions(sts, history, collisions)
        if plan.create is not None:
            update = self._create_revision(plan.create)
        elif plan.renumber is not None and plan.reuse is not None:
            update = self._patch_revision(plan.reuse, plan.renumber)
        else:
            assert plan.reuse is not None
            update = plan.reuse
        wanted = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in history if name_of(r) == wanted), update)
        return current, update

    def _create_revision(self, body: ControllerRevision) -> ControllerRevision:
        try:
            return self.create("apps/v1", "controllerrevisions", body, self.revisions)
        except KubeError as exc:
            if exc.code != 409:
                raise
            existing = self.revisions.get(object_key(body))
            if existing is not None and existing.get("data") == body.get("data"):
                return existing
            raise

    def _patch_revision(self, revision: ControllerRevision, number: int) -> ControllerRevision:
        path = f"/apis/apps/v1/namespaces/{meta(revision).get('namespace')}/controllerrevisions/{name_of(revision)}"
        patched = cast(ControllerRevision, self.http.patch(path, {"revision": number}, "merge"))
        self.revisions.written(patched)
        return patched

    # -- the pods -----------------------------------------------------------------------------
    def _new_pod(self, sts: StatefulSet, current: ControllerRevision, update: ControllerRevision, index: int) -> Pod:
        spec = sts.get("spec") or {}
        strategy = spec.get("updateStrategy") or {}
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        revision = current if strategy.get("type", "RollingUpdate") == "RollingUpdate" and index < partition else update
        template = revisions.template_of(revision)
        name = f"{name_of(sts)}-{index}"
        pod = pod_from_template(
            template, owner_ref(sts, "apps/v1", "StatefulSet"), str(meta(sts).get("namespace")), name=name
        )
        pod["metadata"]["labels"].update(
            {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(index), REVISION_LABEL: name_of(revision)}
        )
        pod_spec = pod["spec"]
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        for claim in spec.get("volumeClaimTemplates") or []:
            claim_name = name_of(claim)
            volume: Volume = {"name": claim_name, "persistentVolumeClaim": {"claimName": f"{claim_name}-{name}"}}
            pod_spec["volumes"] = [v for v in pod_spec.get("volumes") or [] if v.get("name") != claim_name] + [volume]
        return pod

    def _create_pod(self, sts: StatefulSet, pod: Pod) -> None:
        for claim in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
            self._create_claim(sts, claim, name_of(pod))
        self.create("v1", "pods", pod, self.pods)
        self._record(
            sts, "Normal", "SuccessfulCreate", f"create Pod {name_of(pod)} in StatefulSet {name_of(sts)} successful"
        )

    def _create_claim(self, sts: StatefulSet, claim: KubeObject, pod_name: str) -> None:
        name = f"{meta(claim).get('name')}-{pod_name}"
        namespace = str(meta(sts).get("namespace"))
        if self.claims.get(f"{namespace}/{name}") is not None:
            return
        selector_labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        body: KubeObject = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {**(meta(claim).get("labels") or {}), **selector_labels},
            },
            "spec": copy.deepcopy(claim.get("spec") or {}),
        }
        try:
            self.create("v1", "persistentvolumeclaims", body, self.claims)
        except KubeError as exc:
            if exc.code != 409:
                raise
            return
        text = f"create Claim {name} Pod {pod_name} in StatefulSet {name_of(sts)} success"
        self._record(sts, "Normal", "SuccessfulCreate", text)

    def _delete_pod(self, sts: StatefulSet, pod: Pod, reason: str = "SuccessfulDelete") -> None:
        self.delete(pod, "v1", "pods", self.pods)
        if reason == "SuccessfulDelete":
            self._record(sts, "Normal", reason, f"delete Pod {name_of(pod)} in StatefulSet {name_of(sts)} successful")

    def _update(
        self, sts: StatefulSet, current: ControllerRevision, update: ControllerRevision, pods: Sequence[Pod]
    ) -> None:
        """One round of kube's updateStatefulSet: create, replace, scale down, roll — in order."""
        spec = sts.get("spec") or {}
        count = int(spec.get("replicas", 1))
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        replicas: list[Pod | None] = [None] * count
        condemned: list[Pod] = []
        for existing in pods:
            index = ordinal(existing, name_of(sts))
            if index < count:
                replicas[index] = existing
            else:
                condemned.append(existing)
        condemned.sort(key=lambda p: ordinal(p, name_of(sts)))
        unhealthy = [p for p in [*replicas, *condemned] if p is not None and not _healthy(p)]
        first_unhealthy = min(unhealthy, key=lambda p: ordinal(p, name_of(sts)), default=None)
        for index, member in enumerate(replicas):
            pod: Pod | None = member
            if pod is not None and phase(pod) in FINISHED and not is_terminating(pod):
                text = (
                    f"StatefulSet {meta(sts).get('namespace')}/{name_of(sts)} is recreating failed Pod {name_of(pod)}"
                )
                self._record(sts, "Warning", "RecreatingFailedPod", text)
                self._delete_pod(sts, pod, reason="")
                pod = replicas[index] = None
            if pod is None:
                self._create_pod(sts, self._new_pod(sts, current, update, index))
                if monotonic:
                    return
                continue
            if monotonic and (is_terminating(pod) or not is_running_and_ready(pod)):
                return  # every lower ordinal must be Running and Ready first
        for doomed in reversed(condemned):
            if is_terminating(doomed):
                if monotonic:
                    return
                continue
            if monotonic and not is_running_and_ready(doomed) and doomed is not first_unhealthy:
                return
            self._delete_pod(sts, doomed)
            if monotonic:
                return
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") == "OnDelete":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for candidate in reversed(replicas[partition:]):
            if candidate is None:
                return
            if _revision_of(candidate) != name_of(update) and not is_terminating(candidate):
                self._delete_pod(sts, candidate)
                return
            if not _healthy(candidate):
                return

    # -- status and history -------------------------------------------------------------------
    def _write_status(
        self, sts: StatefulSet, current: ControllerRevision, update: ControllerRevision, pods: Sequence[Pod]
    ) -> None:
        spec, old = sts.get("spec") or {}, sts.get("status") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock()
        counted = [p for p in pods if not is_terminating(p)]
        status: StatefulSetStatus = {
            "observedGeneration": int(meta(sts).get("generation") or 0),
            "replicas": len(pods),
            "readyReplicas": sum(1 for p in pods if is_running_and_ready(p)),
            "currentReplicas": sum(1 for p in counted if _revision_of(p) == name_of(current)),
            "updatedReplicas": sum(1 for p in counted if _revision_of(p) == name_of(update)),
            "availableReplicas": sum(1 for p in pods if is_running_and_ready(p) and is_available(p, min_ready, now)),
            "currentRevision": name_of(current),
            "updateRevision": name_of(update),
            "collisionCount": int(old.get("collisionCount") or 0),
        }
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        if rolling and status["updatedReplicas"] == status["replicas"] == status["readyReplicas"]:
            status["currentReplicas"], status["currentRevision"] = status["updatedReplicas"], status["updateRevision"]
        if status != old:
            self.put_status(sts, "apps/v1", "statefulsets", status, self.sets)
        if min_ready and status["readyReplicas"] != status["availableReplicas"]:
            self.requeue_after(object_key(sts), min_ready)

    def _truncate(
        self, sts: StatefulSet, current: ControllerRevision, update: ControllerRevision, pods: Sequence[Pod]
    ) -> None:
        live = {name_of(current), name_of(update), *(_revision_of(p) for p in pods)}
        limit = int((sts.get("spec") or {}).get("revisionHistoryLimit", 10))
        for revision in revisions.history_victims(
            self.revisions.by_index(BY_CONTROLLER, str(meta(sts).get("uid", ""))), live, limit
        ):
            self.delete(revision, "apps/v1", "controllerrevisions", self.revisions)

    def _record(self, sts: StatefulSet, type_: str, reason: str, text: str) -> None:
        self.event(sts, "apps/v1", "StatefulSet", type_, reason, text)
