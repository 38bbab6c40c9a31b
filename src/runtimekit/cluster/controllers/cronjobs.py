"""The CronJob controller, as kube's (cronjob_controllerv2): Jobs from a CronJob's schedule.

Per CronJob, level-based, with time from the injected `clock` (tests move it instead of waiting):
- `status.active` lists the unfinished Jobs it controls; a Job seen finished leaves it (Event
  `SawCompletedJob`) and a completed one sets `status.lastSuccessfulTime`;
- the most recent run due since `status.lastScheduleTime` (else its creation) starts a Job
  `<cronjob>-<minutes since the epoch>` from `spec.jobTemplate` (owned by the CronJob, with the
  `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation), sets `lastScheduleTime` and records
  `SuccessfulCreate`; earlier missed runs are skipped, as kube does. Not when `suspend` is true; not
  when the run is older than `startingDeadlineSeconds` (kube looks back no further); with
  `concurrencyPolicy: Forbid` not while a Job is active (`JobAlreadyActive`), with `Replace` the
  active Jobs are deleted first (`SuccessfulDelete`);
- finished Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit` are deleted, oldest
  first (Event `SuccessfulDelete`);
- the CronJob is synced again at its next run. `spec.timeZone` names the zone of the schedule (UTC
  when unset). A schedule that does not parse gets a `UnparseableSchedule` Warning and no Jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.cronschedule import Schedule, ScheduleError
from runtimekit.cluster.controllers.pods import is_terminating, owner_key, owner_ref
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import Change, Informers
from runtimekit.kube.objects import CronJob, CronJobStatus, Job, ObjectReference, meta, object_key

CRONJOBS_PATH = "/apis/batch/v1/cronjobs"
JOBS_PATH = "/apis/batch/v1/jobs"
SCHEDULED_AT = "batch.kubernetes.io/cronjob-scheduled-timestamp"
_MISSED_LIMIT = 100  # kube warns when more runs than this were missed
_HISTORY = (("Complete", "successfulJobsHistoryLimit", 3), ("Failed", "failedJobsHistoryLimit", 1))


def finished(job: Job) -> str:
    """ "Complete", "Failed" or "" (still running), from the Job's conditions."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return ""


def due_run(schedule: Schedule, tz: str, since: float, now: float) -> tuple[float | None, int]:
    """The latest run in (since, now] and how many runs there were in it."""
    latest, count, t = None, 0, since
    while (nxt := schedule.next_after(t, tz)) is not None and nxt <= now:
        latest, count, t = nxt, count + 1, nxt
        if count > _MISSED_LIMIT:  # far behind: jump to the last run before now
            back = now - 60.0
            while (again := schedule.next_after(back, tz)) is not None and again <= now:
                latest, back = again, again
            break
    return latest, count


class CronJobController(Controller):
    """See the module docstring."""

    name = "cronjob-controller"

    def __init__(self, http: KubeHttp, informers: Informers, clock: Callable[[], float] = time.time) -> None:
        super().__init__(http, informers, clock)
        self.cronjobs = self.watch(CRONJOBS_PATH, CronJob, self._on_cronjob).cache
        self.jobs = self.watch(JOBS_PATH, Job, self._on_job).cache

    def _on_cronjob(self, change: Change[CronJob]) -> None:
        self.queue.add(object_key(change.obj))

    def _on_job(self, change: Change[Job]) -> None:
        for job in (change.old, change.new):
            owner = owner_key(job, "CronJob") if job is not None else ""
            if owner:
                self.queue.add(owner)

    def sync(self, key: str) -> None:
        cronjob = self.cronjobs.get(key)
        if cronjob is None or is_terminating(cronjob):
            return
        spec = cronjob.get("spec") or {}
        uid = meta(cronjob).get("uid")
        namespace = str(meta(cronjob).get("namespace", ""))
        owned = [
            j
            for j in self.jobs.items(namespace)
            if any(r.get("uid") == uid and r.get("controller") for r in meta(j).get("ownerReferences") or [])
        ]
        status: CronJobStatus = {**(cronjob.get("status") or {})}
        active = self._active(cronjob, owned, status)
        self._clean_up(cronjob, owned)
        try:
            schedule = Schedule.parse(str(spec.get("schedule", "")))
            tz = str(spec.get("timeZone") or "")
            schedule.next_after(0, tz)
        except ScheduleError as exc:
            self.event(cronjob, "batch/v1", "CronJob", "Warning", "UnparseableSchedule", f"unparseable schedule: {exc}")
            self._write_status(cronjob, status, active)
            return
        now = self.clock()
        if not spec.get("suspend"):
            active = self._run_due(cronjob, schedule, tz, now, status, active)
        self._write_status(cronjob, status, active)
        nxt = schedule.next_after(now, tz)
        if nxt is not None:
            self.requeue_after(key, nxt - now + 0.1)

    def _active(self, cronjob: CronJob, owned: list[Job], status: CronJobStatus) -> list[Job]:
        """The unfinished owned Jobs; a Job seen finished leaves `active` (and may set lastSuccessfulTime)."""
        listed = {str(r.get("uid")) for r in status.get("active") or []}
        running = []
        for job in owned:
            outcome = finished(job)
            if not outcome:
                running.append(job)
                continue
            if str(meta(job).get("uid")) in listed:
                text = f"Saw completed job: {meta(job).get('name')}, condition: {outcome}"
                self.event(cronjob, "batch/v1", "CronJob", "Normal", "SawCompletedJob", text)
            done_at = parse_rfc3339((job.get("status") or {}).get("completionTime"))
            known = parse_rfc3339(status.get("lastSuccessfulTime"))
            if outcome == "Complete" and done_at is not None and (known is None or done_at > known):
                status["lastSuccessfulTime"] = rfc3339(done_at)
        return running

    def _run_due(
        self, cronjob: CronJob, schedule: Schedule, tz: str, now: float, status: CronJobStatus, active: list[Job]
    ) -> list[Job]:
        spec = cronjob.get("spec") or {}
        since = parse_rfc3339(status.get("lastScheduleTime")) or parse_rfc3339(meta(cronjob).get("creationTimestamp"))
        deadline = spec.get("startingDeadlineSeconds")
        if since is None:
            return active
        if isinstance(deadline, int):
            since = max(since, now - deadline)  # kube's window: a run older than the deadline is gone
        run, missed = due_run(schedule, tz, since, now)
        if run is None:
            return active
        if missed > _MISSED_LIMIT:
            self.event(cronjob, "batch/v1", "CronJob", "Warning", "TooManyMissedTimes", "too many missed start times")
        if isinstance(deadline, int) and run < now - deadline:
            text = f"Missed scheduled time to start a job: {rfc3339(run)}"
            self.event(cronjob, "batch/v1", "CronJob", "Warning", "MissSchedule", text)
            return active
        policy = spec.get("concurrencyPolicy") or "Allow"
        if policy == "Forbid" and active:
            text = "Not starting job because prior execution is running and concurrency policy is Forbid"
            self.event(cronjob, "batch/v1", "CronJob", "Normal", "JobAlreadyActive", text)
            return active
        if policy == "Replace":
            for job in active:
                self.delete(job, "batch/v1", "jobs", self.jobs, propagation="Background")
                self.event(
                    cronjob, "batch/v1", "CronJob", "Normal", "SuccessfulDelete", f"Deleted job {meta(job).get('name')}"
                )
            active = []
        made = self._create_job(cronjob, run, tz)
        status["lastScheduleTime"] = rfc3339(run)
        return [*active, made] if made is not None else active

    def _create_job(self, cronjob: CronJob, run: float, tz: str) -> Job | None:
        m = meta(cronjob)
        template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
        template_meta = template.get("metadata") or {}
        name = f"{m.get('name')}-{int(run // 60)}"
        body: Job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": m.get("namespace", ""),
                "labels": dict(template_meta.get("labels") or {}),
                "annotations": {**(template_meta.get("annotations") or {}), SCHEDULED_AT: _in_zone(run, tz)},
                "ownerReferences": [owner_ref(cronjob, "batch/v1", "CronJob")],
            },
            "spec": template.get("spec") or {},
        }
        try:
            made = self.create("batch/v1", "jobs", body, self.jobs)
        except KubeError as exc:
            if exc.code == 409:  # made by an earlier sync whose answer we did not see
                return self.jobs.get(f"{m.get('namespace', '')}/{name}")
            self.event(cronjob, "batch/v1", "CronJob", "Warning", "FailedCreate", f"Error creating job: {exc}")
            raise
        self.event(cronjob, "batch/v1", "CronJob", "Normal", "SuccessfulCreate", f"Created job {name}")
        return made

    def _clean_up(self, cronjob: CronJob, owned: list[Job]) -> None:
        spec = cronjob.get("spec") or {}
        for outcome, field, default in (
            ("Complete", "successfulJobsHistoryLimit", 3),
            ("Failed", "failedJobsHistoryLimit", 1),
        ):
            limit = spec.get(field, default)
            if not isinstance(limit, int):
                continue
            done = sorted((j for j in owned if finished(j) == outcome), key=_started)
            for job in done[: max(0, len(done) - limit)]:
                self.delete(job, "batch/v1", "jobs", self.jobs, propagation="Background")
                self.event(
                    cronjob, "batch/v1", "CronJob", "Normal", "SuccessfulDelete", f"Deleted job {meta(job).get('name')}"
                )

    def _deleted(self, cronjob: CronJob, job: Job) -> None:
        self.event(cronjob, "batch/v1", "CronJob", "Normal", "SuccessfulDelete", f"Deleted job {meta(job).get('name')}")

    def _write_status(self, cronjob: CronJob, status: CronJobStatus, active: list[Job]) -> None:
        if active:
            status["active"] = [_reference(j) for j in sorted(active, key=lambda j: str(meta(j).get("name")))]
        else:
            status.pop("active", None)
        if status != (cronjob.get("status") or {}):
            self.put_status(cronjob, "batch/v1", "cronjobs", status, self.cronjobs)


def _started(job: Job) -> float:
    at = parse_rfc3339((job.get("status") or {}).get("startTime")) or parse_rfc3339(meta(job).get("creationTimestamp"))
    return at or 0.0


def _reference(job: Job) -> ObjectReference:
    m = meta(job)
    return {
        "kind": "Job",
        "namespace": m.get("namespace", ""),
        "name": str(m.get("name", "")),
        "uid": str(m.get("uid", "")),
        "apiVersion": "batch/v1",
        "resourceVersion": str(m.get("resourceVersion", "")),
    }


def _in_zone(run: float, tz: str) -> str:
    """The scheduled time in the CronJob's zone, RFC 3339 with its offset (kube's annotation)."""
    return datetime.fromtimestamp(run, ZoneInfo(tz)).isoformat() if tz else rfc3339(run)
