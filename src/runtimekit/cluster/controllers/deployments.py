"""The Deployment controller, as kube's: ReplicaSets per pod template, rolled by the strategy.

Per Deployment, level-based (the arithmetic is `rollout.py`):
- claims the ReplicaSets of its namespace its selector matches (adopting orphans, releasing what
  no longer matches); the *new* ReplicaSet is the oldest whose template equals the Deployment's
  ignoring `pod-template-hash`. A missing one is created as `<deployment>-<hash>` with that label on
  itself, its selector and its template, a controller reference, `minReadySeconds`, the
  Deployment's annotations and `deployment.kubernetes.io/revision` (old maximum + 1),
  `desired-replicas` and `max-replicas`; a name taken by a ReplicaSet with another template bumps
  `status.collisionCount`. The Deployment carries the new set's revision annotation.
- when `replicas` changed (an active set's `desired-replicas` differs) or the Deployment is paused:
  only scaling, proportionally across active sets during a rollout;
- `RollingUpdate`: grow the new set up to `replicas + maxSurge` in all, shrink old ones while
  `replicas - maxUnavailable` stay available (unhealthy replicas first); `Recreate`: old sets to 0,
  wait until their pods are gone, then the new set to `replicas`;
- a finished rollout deletes empty old sets beyond `revisionHistoryLimit`;
- status: `observedGeneration`, `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
  `unavailableReplicas`, `collisionCount`, conditions `Available` (`MinimumReplicasAvailable` /
  `MinimumReplicasUnavailable`) and `Progressing` (`NewReplicaSetCreated`, `FoundNewReplicaSet`,
  `ReplicaSetUpdated`, `NewReplicaSetAvailable`, `ProgressDeadlineExceeded`, `DeploymentPaused`,
  `DeploymentResumed`), so `kubectl rollout status` reads it as against kube. Events
  `ScalingReplicaSet` ("Scaled up replica set X from A to B") and `SelectingAll`.
A Deployment being deleted only gets its status written. Not done: rollback through
`spec.rollbackTo` (removed from apps/v1; `kubectl rollout undo` patches the template and works).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import cast

from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.cluster.controllers import rollout
from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.conditions import condition, set_condition
from runtimekit.cluster.controllers.pods import FINISHED, name_of, owner_key, owner_ref, phase
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import BY_CONTROLLER, Change, Informers
from runtimekit.kube.objects import (
    Deployment,
    DeploymentStatus,
    JsonObject,
    Pod,
    ReplicaSet,
    labels_of,
    meta,
    object_key,
)
from runtimekit.kube.semantics.labels import label_selector_or_nothing
from runtimekit.kube.semantics.owners import controller_uid

log = logging.getLogger(__name__)
DEPLOY_PATH = "/apis/apps/v1/deployments"
RS_PATH = "/apis/apps/v1/replicasets"
PODS_PATH = "/api/v1/pods"
PROGRESSING, AVAILABLE = "Progressing", "Available"


class DeploymentController(Controller):
    """See the module docstring."""

    name = "deployment-controller"

    def __init__(self, http: KubeHttp, informers: Informers) -> None:
        super().__init__(http, informers)
        self.deployments = self.watch(DEPLOY_PATH, Deployment, self._on_deployment).cache
        self.sets = self.watch(RS_PATH, ReplicaSet, self._on_set).cache
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache

    # -- events -------------------------------------------------------------------------------
    def _on_deployment(self, change: Change[Deployment]) -> None:
        self.queue.add(object_key(change.obj))

    def _on_set(self, change: Change[ReplicaSet]) -> None:
        for rs in (change.old, change.new):
            if rs is None:
                continue
            owner = owner_key(rs, "Deployment")
            if owner:
                self.queue.add(owner)
            elif change.new is not None:
                for d in self.deployments.items(str(meta(rs).get("namespace", ""))):
                    if label_selector_or_nothing((d.get("spec") or {}).get("selector")).matches(labels_of(rs)):
                        self.queue.add(object_key(d))

    def _on_pod(self, change: Change[Pod]) -> None:
        """Recreate waits for old pods to go: a pod that ends or goes wakes its Deployment."""
        if change.new is not None and phase(change.new) not in FINISHED:
            return
        rs = self.sets.get(owner_key(change.obj, "ReplicaSet"))
        if rs is not None and owner_key(rs, "Deployment"):
            self.queue.add(owner_key(rs, "Deployment"))

    # -- sync ---------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        cached = self.deployments.get(key)
        if cached is None:
            return
        d = copy.deepcopy(cached)
        status: DeploymentStatus = copy.deepcopy(d.get("status") or {})
        spec = d.get("spec") or {}
        if label_selector_or_nothing(spec.get("selector")).everything:
            self._record(
                d, "Warning", "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required."
            )
            self._write_status(d, {**status, "observedGeneration": meta(d).get("generation", 0)})
            return
        candidates = self.sets.items(str(meta(d).get("namespace", "")))
        ref = owner_ref(d, "apps/v1", "Deployment")
        sets = self.claim(d, ref, spec.get("selector"), candidates, ("apps/v1", "replicasets", self.sets))
        if meta(d).get("deletionTimestamp"):
            new_set, old_sets = self._find(d, sets)
            self._finish(d, status, new_set, old_sets, rolling=False)
            return
        self._paused_condition(d, status)
        if spec.get("paused") or self._scaling(d, sets):
            d, new_set, old_sets = self._sets_and_revision(d, status, sets, create=False)
            old_sets, new_set = self._scale(d, new_set, old_sets)
            if spec.get("paused"):
                self._cleanup(d, old_sets)
            self._finish(d, status, new_set, old_sets, rolling=False)
        elif rollout.is_rolling(d):
            self._roll(d, status, sets)
        else:
            self._recreate(d, status, sets)

    def _find(self, d: Deployment, sets: Sequence[ReplicaSet]) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        template = (d.get("spec") or {}).get("template") or {}
        new_set = next(
            (
                rs
                for rs in rollout.created_order(sets)
                if rollout.same_template((rs.get("spec") or {}).get("template") or {}, template)
            ),
            None,
        )
        return new_set, [rs for rs in sets if rs is not new_set]

    def _scaling(self, d: Deployment, sets: Sequence[ReplicaSet]) -> bool:
        """An active set that does not believe in the current `replicas` means `replicas` changed."""
        for rs in rollout.active(sets):
            desired = (meta(rs).get("annotations") or {}).get(rollout.DESIRED)
            if desired is not None and desired != str(rollout.replicas(d)):
                return True
        return False

    def _roll(self, d: Deployment, status: DeploymentStatus, sets: Sequence[ReplicaSet]) -> None:
        d, new_set, old_sets = self._sets_and_revision(d, status, sets, create=True)
        if new_set is None:
            return
        all_sets = [*old_sets, new_set]
        if self._reconcile_new(d, all_sets, new_set) or self._reconcile_old(d, all_sets, old_sets, new_set):
            self._finish(d, status, new_set, self._current(old_sets), rolling=True)
            return
        if rollout.is_complete(d, d.get("status") or {}):
            self._cleanup(d, old_sets)
        self._finish(d, status, new_set, old_sets, rolling=True)

    def _recreate(self, d: Deployment, status: DeploymentStatus, sets: Sequence[ReplicaSet]) -> None:
        d, new_set, old_sets = self._sets_and_revision(d, status, sets, create=False)
        scaled = False
        for rs in rollout.active(old_sets):
            scaled = self._scale_set(rs, 0, d) or scaled
        if scaled or self._old_pods_running(new_set, old_sets):
            self._finish(d, status, new_set, self._current(old_sets), rolling=True)
            return
        if new_set is None:
            d, new_set, old_sets = self._sets_and_revision(d, status, sets, create=True)
            if new_set is None:
                return
        self._scale_set(new_set, rollout.replicas(d), d)
        new_set = self._current([new_set])[0]
        if rollout.is_complete(d, d.get("status") or {}):
            self._cleanup(d, old_sets)
        self._finish(d, status, new_set, old_sets, rolling=True)

    def _current(self, sets: Sequence[ReplicaSet]) -> list[ReplicaSet]:
        """The latest cached versions (what our own writes left there)."""
        return [self.sets.get(object_key(rs)) or rs for rs in sets]

    def _old_pods_running(self, new_set: ReplicaSet | None, old_sets: Sequence[ReplicaSet]) -> bool:
        new_uid = str(meta(new_set).get("uid", "")) if new_set is not None else ""
        for rs in old_sets:
            uid = str(meta(rs).get("uid", ""))
            if uid != new_uid and any(phase(p) not in FINISHED for p in self.pods.by_index(BY_CONTROLLER, uid)):
                return True
        return False

    # -- the new ReplicaSet and the revision --------------------------------------------------
    def _sets_and_revision(
        self, d: Deployment, status: DeploymentStatus, sets: Sequence[ReplicaSet], create: bool
    ) -> tuple[Deployment, ReplicaSet | None, list[ReplicaSet]]:
        """(the Deployment as now stored, the new ReplicaSet or None, the old ones)."""
        new_set, old_sets = self._find(d, sets)
        revision = max((rollout.revision(rs) for rs in old_sets), default=0) + 1
        now = self._now()
        if new_set is not None:
            annotations = rollout.new_set_annotations(d, dict(meta(new_set).get("annotations") or {}), revision, True)
            min_ready = (d.get("spec") or {}).get("minReadySeconds")
            if (
                annotations != (meta(new_set).get("annotations") or {})
                or (new_set.get("spec") or {}).get("minReadySeconds") != min_ready
            ):
                new_set = self._patch_set(
                    new_set, {"metadata": {"annotations": annotations}, "spec": {"minReadySeconds": min_ready}}
                )
            d = self._set_revision(d, (meta(new_set).get("annotations") or {}).get(rollout.REVISION, ""))
            if rollout.has_deadline(d) and condition(status, PROGRESSING) is None:
                set_condition(
                    status,
                    PROGRESSING,
                    "True",
                    "FoundNewReplicaSet",
                    f'Found new replica set "{name_of(new_set)}"',
                    now,
                )
            return d, new_set, old_sets
        if not create:
            return d, None, old_sets
        made = self._create_set(d, status, old_sets, revision)
        if made is None:
            return d, None, old_sets
        d = self._set_revision(d, str(revision))
        if rollout.has_deadline(d):
            set_condition(
                status, PROGRESSING, "True", "NewReplicaSetCreated", f'Created new replica set "{name_of(made)}"', now
            )
        return d, made, old_sets

    def _create_set(
        self, d: Deployment, status: DeploymentStatus, old_sets: Sequence[ReplicaSet], revision: int
    ) -> ReplicaSet | None:
        spec = d.get("spec") or {}
        collisions = int(status.get("collisionCount") or 0)
        template = copy.deepcopy(spec.get("template") or {})
        digest = rollout.template_digest(template, collisions)
        template.setdefault("metadata", {}).setdefault("labels", {})[rollout.HASH_LABEL] = digest
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[rollout.HASH_LABEL] = digest
        body: ReplicaSet = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name_of(d)}-{digest}",
                "namespace": meta(d).get("namespace", ""),
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [owner_ref(d, "apps/v1", "Deployment")],
            },
            "spec": {"replicas": 0, "selector": selector, "template": template},
        }
        if spec.get("minReadySeconds"):
            body["spec"]["minReadySeconds"] = spec["minReadySeconds"]
        body["spec"]["replicas"] = rollout.new_replicas(d, [*old_sets, body], body)
        body["metadata"]["annotations"] = rollout.new_set_annotations(d, {}, revision, False)
        try:
            made = self.create("apps/v1", "replicasets", body, self.sets)
        except KubeError as exc:
            if exc.code != 409:
                message = f'Failed to create new replica set "{body["metadata"]["name"]}": {exc}'
                self._record(d, "Warning", "ReplicaSetCreateError", message)
                raise
            existing = self.sets.get(f"{meta(d).get('namespace')}/{body['metadata']['name']}")
            if existing is not None and controller_uid(existing) == meta(d).get("uid"):
                return existing  # ours: the cache was behind
            status["collisionCount"] = collisions + 1  # another template took the name: hash again
            self._write_status(d, status)
            return None
        replicas = rollout.replicas(made)
        if replicas > 0:
            self._record(
                d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name_of(made)} from 0 to {replicas}"
            )
        return made

    def _set_revision(self, d: Deployment, revision: str) -> Deployment:
        if not revision or (meta(d).get("annotations") or {}).get(rollout.REVISION) == revision:
            return d
        return self.patch_meta(
            d, "apps/v1", "deployments", {"annotations": {rollout.REVISION: revision}}, self.deployments
        )

    # -- scaling ------------------------------------------------------------------------------
    def _patch_set(self, rs: ReplicaSet, body: JsonObject) -> ReplicaSet:
        """A merge patch (`body`) of the ReplicaSet, conditional on the version we saw."""
        body["metadata"]["resourceVersion"] = meta(rs).get("resourceVersion")
        path = object_path("apps/v1", "replicasets", str(meta(rs).get("namespace")), name_of(rs))
        patched = cast(ReplicaSet, self.http.patch(path, body, "merge"))
        self.sets.written(patched)
        return patched

    def _scale_set(self, rs: ReplicaSet, size: int, d: Deployment, force: bool = False) -> bool:
        """Set a ReplicaSet's size (and its replica annotations); True when the size changed."""
        annotations = rollout.replica_annotations(d)
        current = meta(rs).get("annotations") or {}
        stale = any(current.get(k) != v for k, v in annotations.items())
        before = rollout.replicas(rs)
        if before == size and not (force and stale):
            return False
        self._patch_set(rs, {"metadata": {"annotations": annotations}, "spec": {"replicas": size}})
        if before != size:
            direction = "up" if size > before else "down"
            text = f"Scaled {direction} replica set {name_of(rs)} from {before} to {size}"
            self._record(d, "Normal", "ScalingReplicaSet", text)
        return before != size

    def _scale(
        self, d: Deployment, new_set: ReplicaSet | None, old_sets: list[ReplicaSet]
    ) -> tuple[list[ReplicaSet], ReplicaSet | None]:
        sizes = rollout.proportional_sizes(d, new_set, old_sets)
        for rs in [*old_sets, *([new_set] if new_set is not None else [])]:
            if name_of(rs) in sizes:
                self._scale_set(rs, sizes[name_of(rs)], d, force=True)
        fresh = self._current(old_sets)
        return fresh, (self._current([new_set])[0] if new_set is not None else None)

    def _reconcile_new(self, d: Deployment, all_sets: Sequence[ReplicaSet], new_set: ReplicaSet) -> bool:
        wanted, have = rollout.replicas(d), rollout.replicas(new_set)
        if have == wanted:
            return False
        size = wanted if have > wanted else rollout.new_replicas(d, all_sets, new_set)
        return self._scale_set(new_set, size, d)

    def _reconcile_old(
        self, d: Deployment, all_sets: Sequence[ReplicaSet], old_sets: Sequence[ReplicaSet], new_set: ReplicaSet
    ) -> bool:
        sizes = rollout.old_scale_down(d, all_sets, rollout.active(old_sets), new_set)
        scaled = False
        for rs in old_sets:
            if name_of(rs) in sizes:
                scaled = self._scale_set(rs, sizes[name_of(rs)], d) or scaled
        return scaled

    def _cleanup(self, d: Deployment, old_sets: Sequence[ReplicaSet]) -> None:
        for rs in rollout.history_victims(d, old_sets):
            self.delete(rs, "apps/v1", "replicasets", self.sets)

    # -- status -------------------------------------------------------------------------------
    def _paused_condition(self, d: Deployment, status: DeploymentStatus) -> None:
        if not rollout.has_deadline(d):
            return
        current = condition(status, PROGRESSING)
        paused = bool((d.get("spec") or {}).get("paused"))
        if paused and (current is None or current.get("reason") != "DeploymentPaused"):
            set_condition(status, PROGRESSING, "Unknown", "DeploymentPaused", "Deployment is paused", self._now())
        elif not paused and current is not None and current.get("reason") == "DeploymentPaused":
            set_condition(status, PROGRESSING, "Unknown", "DeploymentResumed", "Deployment is resumed", self._now())

    def _finish(
        self,
        d: Deployment,
        status: DeploymentStatus,
        new_set: ReplicaSet | None,
        old_sets: Sequence[ReplicaSet],
        rolling: bool,
    ) -> None:
        """Compute and write the status (with progress estimation when `rolling`)."""
        all_sets = [*old_sets, *([new_set] if new_set is not None else [])]
        fresh: DeploymentStatus = {
            **rollout.calculate_status(d, all_sets, new_set),
            "conditions": list(status.get("conditions") or []),
        }
        now = self._now()
        minimum = rollout.replicas(d) - rollout.max_unavailable(d)
        if fresh["availableReplicas"] >= minimum:
            set_condition(
                fresh, AVAILABLE, "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", now
            )
        else:
            text = "Deployment does not have minimum availability."
            set_condition(fresh, AVAILABLE, "False", "MinimumReplicasUnavailable", text, now)
        if rolling and not (d.get("spec") or {}).get("paused"):
            self._progress(d, fresh, new_set, now)
        if not fresh["conditions"]:
            fresh.pop("conditions")
        self._write_status(d, fresh)

    def _progress(self, d: Deployment, status: DeploymentStatus, new_set: ReplicaSet | None, now: str) -> None:
        if not rollout.has_deadline(d):
            status["conditions"] = [c for c in status["conditions"] if c.get("type") != PROGRESSING]
            return
        current = condition(d.get("status") or {}, PROGRESSING)
        done = status["replicas"] == status["updatedReplicas"] and current is not None
        if done and current is not None and current.get("reason") == "NewReplicaSetAvailable":
            return
        subject = f'ReplicaSet "{name_of(new_set)}"' if new_set is not None else f'Deployment "{name_of(d)}"'
        if rollout.is_complete(d, status):
            set_condition(
                status, PROGRESSING, "True", "NewReplicaSetAvailable", f"{subject} has successfully progressed.", now
            )
        elif rollout.is_progressing(d, status):
            # any progress renews a True condition of the same reason (which set_condition leaves
            # alone), keeping the time it became True, as kube does
            keep = (
                current.get("lastTransitionTime", now)
                if current is not None and current.get("status") == "True"
                else now
            )
            status["conditions"] = [c for c in status["conditions"] if c.get("type") != PROGRESSING]
            text = f"{subject} is progressing."
            set_condition(status, PROGRESSING, "True", "ReplicaSetUpdated", text, now, since=keep)
        elif self._timed_out(d, status):
            set_condition(
                status, PROGRESSING, "False", "ProgressDeadlineExceeded", f"{subject} has timed out progressing.", now
            )
        latest = condition(status, PROGRESSING)
        if latest is not None and latest.get("status") == "True" and latest.get("reason") != "NewReplicaSetAvailable":
            since = parse_rfc3339(latest.get("lastUpdateTime")) or self.clock()
            deadline = int((d.get("spec") or {}).get("progressDeadlineSeconds", 600))
            self.requeue_after(object_key(d), max(1.0, since + deadline - self.clock() + 1))

    def _timed_out(self, d: Deployment, status: DeploymentStatus) -> bool:
        progressing = condition(status, PROGRESSING)
        if progressing is None or progressing.get("reason") == "NewReplicaSetAvailable":
            return False
        if progressing.get("reason") == "ProgressDeadlineExceeded":
            return True
        since = parse_rfc3339(progressing.get("lastUpdateTime")) or self.clock()
        return since + int((d.get("spec") or {}).get("progressDeadlineSeconds", 600)) < self.clock()

    def _write_status(self, d: Deployment, status: DeploymentStatus) -> None:
        if status == (d.get("status") or {}):
            return
        latest = self.deployments.get(object_key(d)) or d
        if meta(latest).get("uid") != meta(d).get("uid"):
            return
        self.put_status(latest, "apps/v1", "deployments", status, self.deployments)

    def _record(self, d: Deployment, type_: str, reason: str, text: str) -> None:
        self.event(d, "apps/v1", "Deployment", type_, reason, text)

    def _now(self) -> str:
        return rfc3339(self.clock())
