"""What Volcano's admission webhooks do for `batch.volcano.sh/v1alpha1` Jobs, built into the server.

- `apply_job_defaults` (the mutating webhook, on create): `queue: default`, `maxRetry: 3`, a job
  `minAvailable` of the tasks' summed `minAvailable` (else replicas), and per task a name
  (`default<index>`), `minAvailable` (its replicas) and `maxRetry` (3). `schedulerName` is left to the
  Job controller, which knows which scheduler the cluster runs.
- `admit_job` (the validating webhook, on create and update): no tasks, negative or excess
  `minAvailable`, duplicated task names, invalid lifecycle policies, job plugins the embedded Job
  controller does not run, and on update any change other than `minAvailable`, task `replicas` and
  `priorityClassName`. A refusal is a 400 whose message starts as a webhook denial does
  (`admission webhook "validatejob.volcano.sh" denied the request: ...`), with Volcano's wording.
Pure functions; called by `operations.Api`.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.kube.objects import TaskSpec, VolcanoJob

GROUP = "batch.volcano.sh"
WEBHOOK = "validatejob.volcano.sh"
DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 3
PLUGINS = ("env", "ssh", "svc")  # the job plugins the embedded controller runs
EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)


def is_job(group: str, kind: str) -> bool:
    return group == GROUP and kind == "Job"


def _task_min(task: TaskSpec) -> int:
    value = task.get("minAvailable")
    return int(value) if isinstance(value, int) else int(task.get("replicas") or 0)


def apply_job_defaults(job: VolcanoJob) -> None:
    """The mutating webhook's defaults (see the module docstring); mutates `job`."""
    spec = job.setdefault("spec", {})
    if not isinstance(spec, dict):  # what JSON decodes an object to
        return
    tasks = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    if not spec.get("queue"):
        spec["queue"] = DEFAULT_QUEUE
    if not spec.get("maxRetry"):
        spec["maxRetry"] = DEFAULT_MAX_RETRY
    if not spec.get("minAvailable"):
        spec["minAvailable"] = sum(_task_min(t) for t in tasks)
    for index, task in enumerate(tasks):
        if not task.get("name"):
            task["name"] = f"default{index}"
        if task.get("minAvailable") is None:
            task["minAvailable"] = int(task.get("replicas") or 0)
        if not task.get("maxRetry"):
            task["maxRetry"] = DEFAULT_MAX_RETRY


def _policy_problems(policies: object) -> list[str]:
    found: list[str] = []
    events: set[str] = set()
    codes: set[int] = set()
    for policy in policies if isinstance(policies, list) else []:
        if not isinstance(policy, Mapping):
            continue
        listed = [*(policy.get("events") or []), *([policy["event"]] if policy.get("event") else [])]
        code = policy.get("exitCode")
        if listed and code is not None:
            return [*found, "must not specify event and exitCode simultaneously"]
        if not listed and code is None:
            return [*found, "either event and exitCode should be specified"]
        for event in listed:
            if event not in EVENTS:
                return [*found, f"invalid policy event {event!r}, valid events are {list(EVENTS)}"]
            if policy.get("action") not in ACTIONS:
                return [*found, f"invalid policy action {policy.get('action')!r}, valid actions are {list(ACTIONS)}"]
            if event in events:
                return [*found, f"duplicate event {event} across different policy"]
            events.add(event)
        if code is not None:
            if code == 0:
                return [*found, "0 is not a valid error code"]
            if code in codes:
                return [*found, f"duplicate exitCode {code}"]
            codes.add(int(code))
    if "*" in events and len(events) > 1:
        found.append("if there's * here, no other policy should be here")
    return found


def _create_problems(job: VolcanoJob) -> list[str]:
    spec = job.get("spec") or {}
    tasks = [t for t in spec.get("tasks") or [] if isinstance(t, Mapping)]
    if not tasks:
        return ["No task specified in job spec"]
    found: list[str] = []
    names: set[str] = set()
    for task in tasks:
        name = str(task.get("name", ""))
        if int(task.get("replicas") or 0) < 0:
            found.append(f"'replicas' must be >= 0 in task: {name}")
        if _task_min(task) < 0:
            found.append(f"'minAvailable' must be >= 0 in task: {name}")
        elif _task_min(task) > int(task.get("replicas") or 0):
            found.append(f"'minAvailable' is greater than 'replicas' in task: {name}, job: {_name(job)}")
        if name in names:
            found.append(f"duplicated task name {name}")
        names.add(name)
        found += _policy_problems(task.get("policies"))
    total = sum(int(t.get("replicas") or 0) for t in tasks)
    if int(spec.get("minAvailable") or 0) > total:
        found.append("job 'minAvailable' should not be greater than total replicas in tasks")
    if int(spec.get("minAvailable") or 0) < 0:
        found.append("job 'minAvailable' must be >= 0")
    found += _policy_problems(spec.get("policies"))
    plugins = spec.get("plugins") or {}
    for plugin in sorted(plugins if isinstance(plugins, Mapping) else {}):
        if plugin not in PLUGINS:
            found.append(f"unable to find job plugin: {plugin} (the embedded cluster runs {', '.join(PLUGINS)})")
    return found


def _update_problems(old: VolcanoJob, new: VolcanoJob) -> list[str]:
    old_job, new_job = old.get("spec") or {}, new.get("spec") or {}
    old_tasks, new_tasks = old_job.get("tasks") or [], new_job.get("tasks") or []
    if len(old_tasks) != len(new_tasks):
        return ["job updates may not add or remove tasks"]
    old_spec, new_spec = _without(old_job, _UPDATABLE), _without(new_job, _UPDATABLE)

    def fixed(task: TaskSpec) -> dict[str, object]:
        return _without(task, ("replicas", "minAvailable"))

    if old_spec != new_spec or [fixed(t) for t in old_tasks] != [fixed(t) for t in new_tasks]:
        return [
            "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
            "and `PriorityClassName`"
        ]
    return []


_UPDATABLE = ("tasks", "minAvailable", "priorityClassName")


def _without(fields: Mapping[str, object], dropped: tuple[str, ...]) -> dict[str, object]:
    return {k: v for k, v in fields.items() if k not in dropped}


def _name(job: VolcanoJob) -> str:
    return str((job.get("metadata") or {}).get("name", ""))


def admit_job(job: VolcanoJob, old: VolcanoJob | None) -> None:
    """Raise the webhook's denial (400) when the Job (created, or `old` updated to it) is refused."""
    found = _create_problems(job)
    if old is not None and not found:
        found = _update_problems(old, job)
    if found:
        detail = " ".join(f"{p};" for p in found)
        raise ApiError(400, "BadRequest", f'admission webhook "{WEBHOOK}" denied the request: {detail}')
