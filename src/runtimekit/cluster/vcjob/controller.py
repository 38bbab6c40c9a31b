"""The Volcano Job controller of the embedded cluster (Volcano's `pkg/controllers/job`, in short).

Pod, Job and PodGroup changes become `Request`s (`policies.py`): a pod that fails is `PodFailed` (with
its first container's exit code), one deleted by someone else `PodEvicted`, one that succeeds when
its whole task has `TaskCompleted`, a new one `PodPending`; Job and PodGroup changes `OutOfSync`.
Per request, the job's policies pick an action (after a policy's `timeout`, if any) and the state
machine (`states.py`) says what it does:
- *sync*: on first sight the status becomes Pending; the svc plugin's Service and ConfigMap, the
  PVCs of `spec.volumes` and the PodGroup are made (the PodGroup is updated when `minAvailable`,
  replicas or the queue's resources change); every missing pod `<job>-<task>-<index>` is created
  (a task with `dependsOn` waits until the tasks it names have their `minAvailable` pods running or
  done), pods beyond a task's replicas are deleted, and the pods are counted into the status;
- *kill*: pods are deleted (all, or all but Succeeded and Failed ones, or one task's or pod's), the
  job's `status.version` goes up so the old pods' events no longer count, and the PodGroup goes.
The status (`state.phase` with `lastTransitionTime`, `pending`, `running`, `succeeded`, `failed`,
`terminating`, `unknown`, `minAvailable`, `version`, `retryCount`, `taskStatusCount`, `conditions`,
`controlledResources`, `runningDuration`) is written when it changes; Events `ExecuteAction`,
`FailedCreate`, `PodGroupPending` as Volcano records them.
Differences from Volcano: pods are created as soon as the PodGroup exists, without waiting for the
scheduler to move it to Inqueue (the scheduler's gang rule holds them until `minMember` fit); the
ssh plugin does nothing; the distributed-framework plugins are refused at admission.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import cast

from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.pods import is_terminating, phase
from runtimekit.cluster.vcjob import jobpods, states
from runtimekit.cluster.vcjob.policies import Request, action_for
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informers import BY_CONTROLLER, Change, Informers
from runtimekit.kube.objects import (
    JsonObject,
    Pod,
    PodGroup,
    PodGroupSpec,
    PriorityClass,
    TaskSpec,
    VolcanoJob,
    VolcanoJobStatus,
    annotations_of,
    meta,
    object_key,
)

log = logging.getLogger(__name__)
JOBS_PATH = "/apis/batch.volcano.sh/v1alpha1/jobs"
PODS_PATH = "/api/v1/pods"
GROUPS_PATH = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
PRIORITY_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
PHASE_COUNTS = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed"}


def _job_key(pod: Pod) -> str:
    """The Job a pod belongs to (controller reference to a Volcano Job), "" for other pods."""
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job" and ref.get("apiVersion") == jobpods.API_VERSION:
            return f"{meta(pod).get('namespace', '')}/{ref.get('name')}"
    return ""


def _annotation(pod: Pod, key: str) -> str:
    return str(annotations_of(pod).get(key, ""))


def _duration(seconds: float) -> str:
    """A Go duration string (`1h2m3s`), as metav1.Duration is written."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{text}{secs}s"


class VolcanoJobController(Controller):
    """See the module docstring."""

    name = "vc-controller-manager"

    def __init__(self, http: KubeHttp, informers: Informers, default_scheduler: str) -> None:
        super().__init__(http, informers)
        self.default_scheduler = default_scheduler
        self.jobs = self.watch(JOBS_PATH, VolcanoJob, self._on_job).cache
        self.pods = self.watch(PODS_PATH, Pod, self._on_pod).cache
        self.groups = self.watch(GROUPS_PATH, PodGroup, self._on_group).cache
        self.priorities = self.watch(PRIORITY_PATH, PriorityClass, lambda change: None).cache
        self._lock = threading.Lock()
        self._requests: dict[str, deque[Request]] = {}
        self._delayed: list[tuple[float, Request, int]] = []  # (due, request with its action, job version)
        self._ours: set[str] = set()  # UIDs of pods this controller deleted: their deletion is no eviction
        self._reported: dict[str, str] = {}  # job key -> PodGroup condition message last recorded

    # -- requests -----------------------------------------------------------------------------
    def _push(self, request: Request) -> None:
        with self._lock:
            waiting = self._requests.setdefault(request.job, deque())
            if request not in waiting:  # the same news twice is news once
                waiting.append(request)
        self.queue.add(request.job)

    def _on_job(self, change: Change[VolcanoJob]) -> None:
        key = object_key(change.obj)
        if change.new is None:
            with self._lock:
                self._requests.pop(key, None)
                self._reported.pop(key, None)
            return
        if change.old is not None:
            old, new = change.old, change.new
            old_phase = ((old.get("status") or {}).get("state") or {}).get("phase")
            new_phase = ((new.get("status") or {}).get("state") or {}).get("phase")
            if old.get("spec") == new.get("spec") and old_phase == new_phase:
                return
        self._push(Request(key))

    def _on_group(self, change: Change[PodGroup]) -> None:
        job = next(
            (r.get("name") for r in meta(change.obj).get("ownerReferences") or [] if r.get("kind") == "Job"), None
        )
        old, new = change.old, change.new
        if job is None or new is None:
            return
        old_phase = ((old or {}).get("status") or {}).get("phase")
        new_phase = (new.get("status") or {}).get("phase")
        if old is None or old_phase != new_phase or (old.get("status") != new.get("status")):
            event = "Unknown" if new_phase == "Unknown" else "OutOfSync"
            self._push(Request(f"{meta(change.obj).get('namespace')}/{job}", event=event))

    def _on_pod(self, change: Change[Pod]) -> None:
        pod = change.obj
        key = _job_key(pod)
        task, version = _annotation(pod, jobpods.TASK_SPEC), _annotation(pod, jobpods.JOB_VERSION)
        if not key or not task or not version.isdigit():
            return
        base = Request(key, task=task, pod=str(meta(pod).get("name")), version=int(version))
        if change.new is None:
            uid = str(meta(pod).get("uid", ""))
            with self._lock:
                ours = uid in self._ours
                self._ours.discard(uid)
            self._push(_with(base, "OutOfSync" if ours else "PodEvicted"))
            return
        if change.old is None:
            self._push(_with(base, "PodPending"))
            return
        self._push(self._pod_event(base, change.old, change.new))

    def _pod_event(self, base: Request, old: Pod, new: Pod) -> Request:
        was, now = phase(old), phase(new)
        if now == "Failed" and was != "Failed":
            statuses = (new.get("status") or {}).get("containerStatuses") or []
            code = int(
                (((statuses[0] if statuses else {}).get("state") or {}).get("terminated") or {}).get("exitCode") or 0
            )
            return _with(base, "PodFailed", code)
        if now == "Succeeded" and was != "Succeeded" and self._task_completed(base):
            return _with(base, "TaskCompleted")
        if now == "Running" and was != "Running":
            return _with(base, "PodRunning")
        if now == "Pending" and was != "Pending":
            return _with(base, "PodPending")
        return _with(base, "OutOfSync")

    def _task_completed(self, request: Request) -> bool:
        job = self.jobs.get(request.job)
        task = next((t for t in (job or {}).get("spec", {}).get("tasks") or [] if t.get("name") == request.task), None)
        if job is None or task is None or int(task.get("replicas") or 0) <= 0:
            return False
        done = sum(
            1 for p in self._pods(job) if _annotation(p, jobpods.TASK_SPEC) == request.task and phase(p) == "Succeeded"
        )
        return done >= int(task.get("replicas") or 0)

    # -- sync ---------------------------------------------------------------------------------
    def sync(self, key: str) -> None:
        with self._lock:
            pending = list(self._requests.pop(key, deque()))
            now = time.monotonic()
            due = [(r, v) for d, r, v in self._delayed if d <= now and r.job == key]
            self._delayed = [(d, r, v) for d, r, v in self._delayed if not (d <= now and r.job == key)]
        job = self.jobs.get(key)
        for request, version in due:
            if job is not None and int((job.get("status") or {}).get("version") or 0) == version:
                pending.append(request)
        for index, request in enumerate(pending or [Request(key)]):
            try:
                self._handle(request)
            except Exception:
                with self._lock:  # keep what is not done for the retry
                    self._requests.setdefault(key, deque()).extendleft(reversed(pending[index:]))
                raise
        with self._lock:
            later = [d for d, r, _ in self._delayed if r.job == key]
        if later:  # the queue keeps one timer per key: the earliest of what is still delayed
            self.requeue_after(key, min(later) - time.monotonic())

    def _handle(self, request: Request) -> None:
        job = self.jobs.get(request.job)
        if job is None:
            return
        action, delay = action_for(job, request)
        if delay > 0:
            version = int((job.get("status") or {}).get("version") or 0)
            with self._lock:
                self._delayed.append((time.monotonic() + delay, _act(request, action), version))
            self.requeue_after(request.job, delay)
            self._record(job, "Normal", "ExecuteAction", f"Execute action {action} after {_duration(delay)}")
            return
        if action != "SyncJob":
            self._record(job, "Normal", "ExecuteAction", f"Start to execute action {action} ")
        current = str(((job.get("status") or {}).get("state") or {}).get("phase") or "")
        how, update = states.plan(current, action)
        if how == states.SYNC:
            self._sync_job(job, update)
        elif how == states.KILL_TARGET:
            target = request.pod if action == "RestartPod" else ""
            self._kill(job, soft=False, update=update, task=request.task or "*", pod=target)
        else:
            self._kill(job, soft=how == states.KILL_SOFT, update=update)

    def _pods(self, job: VolcanoJob) -> list[Pod]:
        """The pods the job controls."""
        return self.pods.by_index(BY_CONTROLLER, meta(job).get("uid", ""))

    def _sync_job(self, job: VolcanoJob, update: states.Update | None) -> None:
        if is_terminating(job):
            return
        job = self._prepare(job)
        spec = job.get("spec") or {}
        counts = dict.fromkeys(("pending", "running", "succeeded", "failed", "terminating", "unknown"), 0)
        per_task: dict[str, dict[str, int]] = {}
        existing = {str(meta(p).get("name")): p for p in self._pods(job)}
        for task in spec.get("tasks") or []:
            name, replicas = str(task.get("name")), int(task.get("replicas") or 0)
            missing = [i for i in range(replicas) if jobpods.pod_name(job, name, i) not in existing]
            if missing and self._dependencies_ready(job, task, existing):
                for index in missing:
                    made = self._create_pod(job, task, index)
                    if made is not None:
                        existing[str(meta(made).get("name"))] = made
            for index in range(replicas):
                pod = existing.get(jobpods.pod_name(job, name, index))
                if pod is not None:
                    _count(pod, counts, per_task)
            for pod in existing.values():  # pods of this task beyond its replicas
                pod_index = _annotation(pod, jobpods.TASK_INDEX)
                is_extra = pod_index.isdigit() and int(pod_index) >= replicas
                if _annotation(pod, jobpods.TASK_SPEC) == name and is_extra and not is_terminating(pod):
                    self._kill_pod(pod)
                    counts["terminating"] += 1
        self._write(job, counts, per_task, update, kill=False)
        self._report_group(job)

    def _kill(self, job: VolcanoJob, soft: bool, update: states.Update | None, task: str = "", pod: str = "") -> None:
        if is_terminating(job):
            return
        status = job.get("status") or {}
        last_retry = int(status.get("retryCount") or 0) >= int((job.get("spec") or {}).get("maxRetry") or 0) - 1
        retain = {"Succeeded", "Failed"} if soft or (last_retry and not task) else set()
        counts = dict.fromkeys(("pending", "running", "succeeded", "failed", "terminating", "unknown"), 0)
        per_task: dict[str, dict[str, int]] = {}
        for victim in self._pods(job):
            if is_terminating(victim):
                counts["terminating"] += 1
                continue
            targeted = not task or (
                task in ("*", _annotation(victim, jobpods.TASK_SPEC)) and pod in ("", meta(victim).get("name"))
            )
            if targeted and phase(victim) not in retain:
                self._kill_pod(victim)
                counts["terminating"] += 1
            else:
                _count(victim, counts, per_task)
        self._write(job, counts, per_task, update, kill=not task)
        if not task:
            for group in self.groups.items(str(meta(job).get("namespace"))):
                if meta(group).get("name") == jobpods.group_name(job):
                    self.delete(group, "scheduling.volcano.sh/v1beta1", "podgroups", self.groups)

    def _kill_pod(self, pod: Pod) -> None:
        with self._lock:
            self._ours.add(str(meta(pod).get("uid", "")))
        self.delete(pod, "v1", "pods", self.pods)

    def _write(
        self,
        job: VolcanoJob,
        counts: dict[str, int],
        per_task: dict[str, dict[str, int]],
        update: states.Update | None,
        kill: bool,
    ) -> None:
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        status.update(cast(VolcanoJobStatus, counts))  # counts are keyed by the status fields they fill
        status["minAvailable"] = int((job.get("spec") or {}).get("minAvailable") or 0)
        status["taskStatusCount"] = {task: {"phase": phases} for task, phases in per_task.items()}
        status.setdefault("state", {})
        if kill:
            status["version"] = int(old.get("version") or 0) + 1
        if update is not None:
            update(status, job.get("spec") or {})
        if status == old:
            return
        stamp = rfc3339(self.clock())
        status["state"]["lastTransitionTime"] = stamp
        state = status["state"].get("phase", "")
        conditions = [c for c in status.get("conditions") or [] if c.get("status") != state]
        status["conditions"] = [*conditions, {"status": state, "lastTransitionTime": stamp}]
        if kill:
            created = meta(job).get("creationTimestamp")
            status["runningDuration"] = _duration(self.clock() - (parse_rfc3339(created) or self.clock()))
        self._put_status(job, status)

    def _put_status(self, job: VolcanoJob, status: VolcanoJobStatus) -> VolcanoJob:
        return self.put_status(job, jobpods.API_VERSION, "jobs", status, self.jobs)

    # -- what a job owns ----------------------------------------------------------------------
    def _prepare(self, job: VolcanoJob) -> VolcanoJob:
        """First sight: status Pending; every time: plugin objects, PVCs and the PodGroup up to date."""
        status = job.get("status") or {}
        if not (status.get("state") or {}).get("phase"):
            stamp = rfc3339(self.clock())
            fresh: VolcanoJobStatus = {
                **status,
                "state": {"phase": "Pending", "lastTransitionTime": stamp},
                "minAvailable": int((job.get("spec") or {}).get("minAvailable") or 0),
                "conditions": [{"status": "Pending", "lastTransitionTime": stamp}],
            }
            job = self._put_status(job, fresh)
        plugins = (job.get("spec") or {}).get("plugins") or {}
        if "svc" in plugins:
            for plural, body in jobpods.svc_objects(job):
                self._ensure(plural, body)
        for claim, volume in jobpods.volume_claims(job):
            if volume.get("volumeClaim") is not None:
                body = {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": claim,
                        "namespace": meta(job).get("namespace"),
                        "ownerReferences": [jobpods.job_owner(job)],
                    },
                    "spec": volume["volumeClaim"],
                }
                self._ensure("persistentvolumeclaims", body)
        self._ensure_group(job)
        return job

    def _ensure(self, plural: str, body: JsonObject) -> None:
        """Create unless it exists; a ConfigMap whose data changed is updated."""
        namespace, name = str(meta(body).get("namespace")), str(meta(body).get("name"))
        path = object_path("v1", plural, namespace, name)
        try:
            self.http.post(object_path("v1", plural, namespace), body)
        except KubeError as exc:
            if exc.code != 409:
                raise
            if plural == "configmaps":
                current = self.http.get(path)
                if current.get("data") != body.get("data"):
                    self.http.patch(path, {"data": body.get("data")}, "merge")

    def _ensure_group(self, job: VolcanoJob) -> None:
        priorities = {str(meta(pc).get("name")): int(pc.get("value") or 0) for pc in self.priorities.items()}
        body = jobpods.podgroup(job, priorities)
        current = self.groups.get(object_key(body))
        if current is None:
            try:
                self.create("scheduling.volcano.sh/v1beta1", "podgroups", body, self.groups)
            except KubeError as exc:
                if exc.code != 409:
                    raise
            return
        wanted, have = _sizing(body["spec"]), _sizing(current.get("spec") or {})
        if wanted != have:
            path = object_path(
                "scheduling.volcano.sh/v1beta1",
                "podgroups",
                str(meta(current).get("namespace")),
                str(meta(current).get("name")),
            )
            patch = {"metadata": {"resourceVersion": meta(current).get("resourceVersion")}, "spec": wanted}
            self.groups.written(cast(PodGroup, self.http.patch(path, patch, "merge")))

    def _dependencies_ready(self, job: VolcanoJob, task: TaskSpec, existing: Mapping[str, Pod]) -> bool:
        depends = task.get("dependsOn") or {}
        names = [str(n) for n in depends.get("name") or []]
        if not names:
            return True
        ready = [self._task_ready(job, name, existing) for name in names]
        return any(ready) if depends.get("iteration") == "any" and len(names) > 1 else all(ready)

    def _task_ready(self, job: VolcanoJob, name: str, existing: Mapping[str, Pod]) -> bool:
        task = next((t for t in (job.get("spec") or {}).get("tasks") or [] if t.get("name") == name), None)
        if task is None:
            return True
        running = 0
        for index in range(int(task.get("replicas") or 0)):
            pod = existing.get(jobpods.pod_name(job, name, index))
            if pod is None:
                continue
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            if phase(pod) == "Succeeded" or (phase(pod) == "Running" and all(s.get("ready") for s in statuses)):
                running += 1
        wanted = task.get("minAvailable")
        return wanted is None or running >= int(wanted)

    def _create_pod(self, job: VolcanoJob, task: TaskSpec, index: int) -> Pod | None:
        pod = jobpods.make_pod(job, task, index, self.default_scheduler)
        try:
            return self.create("v1", "pods", pod, self.pods)
        except KubeError as exc:
            if exc.code == 409:
                return None
            self._record(
                job,
                "Warning",
                "FailedCreate",
                f"Error creating pods: [failed to create pod {meta(pod).get('name')}, err: {exc}]",
            )
            raise

    def _report_group(self, job: VolcanoJob) -> None:
        """A PodGroup the scheduler finds unschedulable: a Warning on the Job, once per message."""
        group = self.groups.get(f"{meta(job).get('namespace')}/{jobpods.group_name(job)}")
        conditions = [
            c for c in ((group or {}).get("status") or {}).get("conditions") or [] if c.get("status") == "True"
        ]
        latest = conditions[-1] if conditions else None
        if latest is None or latest.get("type") == "Scheduled":
            return
        where = f"{meta(job).get('namespace')}:{meta(job).get('name')}"
        text = f"PodGroup {where} {str(latest.get('type')).lower()}, reason: {latest.get('message', '')}"
        with self._lock:
            if self._reported.get(object_key(job)) == text:
                return
            self._reported[object_key(job)] = text
        self._record(job, "Warning", "PodGroupPending", text)

    def _record(self, job: VolcanoJob, type_: str, reason: str, text: str) -> None:
        self.event(job, jobpods.API_VERSION, "Job", type_, reason, text)


def _with(request: Request, event: str, exit_code: int = 0) -> Request:
    return Request(request.job, event, request.task, request.pod, exit_code, request.version)


def _act(request: Request, action: str) -> Request:
    return Request(request.job, request.event, request.task, request.pod, request.exit_code, request.version, action)


def _sizing(spec: PodGroupSpec) -> JsonObject:
    """The PodGroup spec fields that follow the Job's (None where unset, so a merge patch clears them)."""
    return {
        "minMember": spec.get("minMember"),
        "minTaskMember": spec.get("minTaskMember"),
        "minResources": spec.get("minResources"),
        "priorityClassName": spec.get("priorityClassName"),
    }


def _count(pod: Pod, counts: dict[str, int], per_task: dict[str, dict[str, int]]) -> None:
    if is_terminating(pod):
        counts["terminating"] += 1
        return
    current = phase(pod)
    counts[PHASE_COUNTS.get(current, "unknown")] += 1
    task = _annotation(pod, jobpods.TASK_SPEC)
    if task:
        phases = per_task.setdefault(task, {})
        phases[current if current in PHASE_COUNTS else "Unknown"] = phases.get(current, 0) + 1
