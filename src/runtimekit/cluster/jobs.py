"""A minimal batch/v1 Job controller for the embedded cluster (the API server otherwise only stores Jobs).

For every Job in every namespace, level-based and idempotent:
- sets `status.startTime` and creates pods from `spec.template` (`generateName: <job>-`, an owner
  reference to the Job, labels `job-name` and `controller-uid` and their `batch.kubernetes.io/`
  forms) until `parallelism` pods are active, never more than are still needed for `completions`;
  a suspended Job (`spec.suspend`) gets no new pods;
- counts its pods into `status.active`, `ready`, `succeeded` and `failed` (counts never go down, so
  a finished pod that is deleted later is still counted);
- `Complete` (with `completionTime`) when `succeeded` reaches `completions`; `Failed` with reason
  `BackoffLimitExceeded` when `failed` exceeds `backoffLimit` (default 6), or `DeadlineExceeded`
  when `activeDeadlineSeconds` have passed since `startTime` — its active pods are deleted then;
- pods carry an owner reference to their Job (`blockOwnerDeletion`), so the garbage collector
  (`runtimekit.cluster.controllers.garbagecollector`) deletes them with it, or orphans them, as the
  delete's propagation policy says.
A failed pod (restartPolicy Never) counts against `backoffLimit` and a new pod replaces it at once,
without kube's exponential delay; with OnFailure the simulated kubelet restarts the container in
place, and those restarts do not count against `backoffLimit`.
Not supported: indexed completion, pod failure and success policies, `ttlSecondsAfterFinished`.
Informers on Jobs and on pods labelled `controller-uid` feed a queue of Job keys; one worker syncs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from runtimekit.base.backoff import Backoff
from runtimekit.base.threads import Workers
from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.base.workqueue import WorkQueue
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import record_event
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import (
    Condition,
    Job,
    JobSpec,
    JobStatus,
    KubeObject,
    OwnerReference,
    Pod,
    labels_of,
    meta,
    object_key,
)

log = logging.getLogger(__name__)
COMPONENT = "job-controller"
UID_LABEL = "controller-uid"
NAME_LABEL = "job-name"
FINISHED = frozenset({"Succeeded", "Failed"})


def finished_condition(job: Job) -> str | None:
    """`Complete` or `Failed` when the Job has that condition True, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def pod_for(job: Job) -> Pod:
    """A new pod from the Job's template."""
    job_meta, spec = meta(job), job.get("spec") or {}
    template = spec.get("template") or {}
    template_meta = template.get("metadata") or {}
    uid, name = str(job_meta.get("uid", "")), str(job_meta.get("name", ""))
    labels = {
        **(template_meta.get("labels") or {}),
        UID_LABEL: uid,
        NAME_LABEL: name,
        f"batch.kubernetes.io/{UID_LABEL}": uid,
        f"batch.kubernetes.io/{NAME_LABEL}": name,
    }
    owner: OwnerReference = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-",
            "namespace": job_meta.get("namespace", "default"),
            "labels": labels,
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [owner],
        },
        "spec": (template.get("spec") or {}).copy(),
    }


class JobController:
    """See the module docstring. `start()`, `synced(timeout)`, `stop()`."""

    def __init__(self, http: KubeHttp, clock: Callable[[], float] = time.time) -> None:
        self.http, self.clock = http, clock
        self.jobs: dict[str, Job] = {}
        self.pods: dict[str, Pod] = {}  # pod uid -> pod, pods labelled controller-uid
        self._lock = threading.Lock()
        self.queue = WorkQueue(Backoff(initial=1.0, maximum=30.0))
        self.informers: list[Informer[Any]] = [
            Informer(http, "/apis/batch/v1/jobs", self._on_job, name="jobs"),
            Informer(http, "/api/v1/pods", self._on_pod, {"labelSelector": UID_LABEL}, name="job pods"),
        ]
        self._workers = Workers("job controller")

    def start(self) -> JobController:
        for informer in self.informers:
            informer.start()
        self._workers.spawn("job-controller", self._work)
        return self

    def synced(self, timeout_s: float) -> bool:
        return all(i.synced.wait(timeout_s) for i in self.informers)

    def stop(self) -> None:
        self.queue.close()
        for informer in self.informers:
            informer.stop(1.0)
        self._workers.stop(5.0)

    # -- events --------------------------------------------------------------------------------
    def _on_job(self, kind: str, job: Job) -> None:
        key = object_key(job)
        with self._lock:
            if kind == "DELETED":
                self.jobs.pop(key, None)
                return
            self.jobs[key] = job
        self.queue.add(key)

    def _on_pod(self, kind: str, pod: Pod) -> None:
        uid = str(meta(pod).get("uid", ""))
        with self._lock:
            if kind == "DELETED":
                self.pods.pop(uid, None)
            else:
                self.pods[uid] = pod
        namespace = meta(pod).get("namespace", "default")
        job = labels_of(pod).get(NAME_LABEL)
        if job:
            self.queue.add(f"{namespace}/{job}")

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.sync(key)
                self.queue.forget(key)
            except KubeError as exc:
                log.info("job %s: %s; again in %.1f s", key, exc, self.queue.retry(key))
            except Exception:
                log.exception("job %s: sync failed; again in %.1f s", key, self.queue.retry(key))
            finally:
                self.queue.done(key)

    # -- sync ----------------------------------------------------------------------------------
    def _owned(self, job_uid: str) -> list[Pod]:
        with self._lock:
            return [p for p in self.pods.values() if labels_of(p).get(UID_LABEL) == job_uid]

    def sync(self, key: str) -> None:
        with self._lock:
            job = self.jobs.get(key)
        if job is None:
            return
        finished = finished_condition(job)
        pods = self._owned(str(meta(job).get("uid", "")))
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in FINISHED]
        if finished == "Failed":
            self._delete_pods([p for p in active if not meta(p).get("deletionTimestamp")])
        if finished:
            return
        status = (job.get("status") or {}).copy()
        spec = job.get("spec") or {}
        now = self.clock()
        start = parse_rfc3339(status.get("startTime")) or now
        status["startTime"] = status.get("startTime") or rfc3339(start)
        succeeded = max(int(status.get("succeeded") or 0), sum(1 for p in pods if _phase(p) == "Succeeded"))
        failed = max(int(status.get("failed") or 0), sum(1 for p in pods if _phase(p) == "Failed"))
        outcome = self._outcome(spec, succeeded, failed, start, now)
        if outcome is None:
            active += self._create_pods(job, spec, active, succeeded)
        else:
            self._delete_pods(active)
            active = []
        status |= {"active": len(active), "succeeded": succeeded, "failed": failed}
        status["ready"] = sum(1 for p in active if _ready(p))
        if outcome is not None:
            status |= self._finish(job, status, outcome, now)
        elif spec.get("activeDeadlineSeconds") is not None:
            self.queue.add_after(key, start + float(spec["activeDeadlineSeconds"]) - now + 0.05)
        if status != (job.get("status") or {}):
            self._write_status(job, status)

    @staticmethod
    def _outcome(spec: JobSpec, succeeded: int, failed: int, start: float, now: float) -> tuple[str, str, str] | None:
        """(condition type, reason, message) when the Job is done, else None."""
        if succeeded >= int(spec.get("completions") or 1):
            return "Complete", "", ""
        if failed > int(spec.get("backoffLimit", 6)):
            return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and now - start >= float(deadline):
            return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
        return None

    def _finish(self, job: Job, status: JobStatus, outcome: tuple[str, str, str], now: float) -> JobStatus:
        kind, reason, message = outcome
        stamp = rfc3339(now)
        condition: Condition = {
            "type": kind,
            "status": "True",
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
        }
        if reason:
            condition |= {"reason": reason, "message": message}
        others = [c for c in status.get("conditions") or [] if c.get("type") != kind]
        change: JobStatus = {"conditions": [*others, condition]}
        if kind == "Complete":
            change["completionTime"] = stamp
            record_event(self.http, _involved(job), "Normal", "Completed", "Job completed", COMPONENT)
        else:
            record_event(self.http, _involved(job), "Warning", reason, message, COMPONENT)
        log.info("job %s: %s %s", object_key(job), kind, reason)
        return change

    def _create_pods(self, job: Job, spec: JobSpec, active: list[Pod], succeeded: int) -> list[Pod]:
        if spec.get("suspend"):
            return []
        wanted = min(int(spec.get("parallelism", 1)), int(spec.get("completions") or 1) - succeeded) - len(active)
        made = []
        namespace = str(meta(job).get("namespace", "default"))
        for _ in range(max(0, wanted)):
            created = cast(Pod, self.http.post(object_path("v1", "pods", namespace), pod_for(job)))
            with self._lock:  # seen at once, so the next sync does not create it again
                self.pods[str(meta(created).get("uid", ""))] = created
            made.append(created)
            name = meta(created).get("name")
            record_event(self.http, _involved(job), "Normal", "SuccessfulCreate", f"Created pod: {name}", COMPONENT)
        return made

    def _delete_pods(self, pods: list[Pod]) -> None:
        for pod in pods:
            pod_meta = meta(pod)
            try:
                self.http.delete(object_path("v1", "pods", str(pod_meta.get("namespace")), str(pod_meta.get("name"))))
            except KubeError as exc:
                if exc.code != 404:
                    raise

    def _write_status(self, job: Job, status: JobStatus) -> None:
        job_meta = meta(job)
        path = object_path("batch/v1", "jobs", str(job_meta.get("namespace")), str(job_meta.get("name")), "status")
        try:
            updated = self.http.patch(path, {"metadata": {"uid": job_meta.get("uid")}, "status": status}, "merge")
        except KubeError as exc:
            if exc.code in (404, 409):
                return  # deleted or replaced meanwhile; its own events follow
            raise
        with self._lock:
            if object_key(updated) in self.jobs:
                self.jobs[object_key(updated)] = cast(Job, updated)


def _phase(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ready(pod: Pod) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _involved(job: Job) -> KubeObject:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(job)}
