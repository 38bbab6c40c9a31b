"""The Volcano Job state machine, as Volcano's job controller runs it (`pkg/controllers/job/state`).

`plan(phase, action)` says what one action does in one phase: how pods are treated (`SYNC` creates
the missing ones and counts; `KILL_ALL` deletes every pod; `KILL_SOFT` deletes all but Succeeded and
Failed ones; `KILL_TARGET` deletes the pods of one task or one pod) and the status update to apply
once the pods are counted (it returns True when the phase changed). Phases: Pending, Running,
Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated, Failed.
Pure functions on the Job's `status` and `spec`; `controller.py` does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from runtimekit.kube.objects import TaskSpec, VolcanoJobSpec, VolcanoJobStatus

SYNC, KILL_ALL, KILL_SOFT, KILL_TARGET = "sync", "kill-all", "kill-soft", "kill-target"
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
RESTARTS = frozenset({"RestartTask", "RestartPod", "RestartPartition"})

Update = Callable[[VolcanoJobStatus, VolcanoJobSpec], bool]  # (status, job spec) -> phase changed


def total_replicas(spec: VolcanoJobSpec) -> int:
    return sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])


def _task_min(task: TaskSpec) -> int:
    value = task.get("minAvailable")
    return int(value) if value is not None else int(task.get("replicas") or 0)


def _count(value: int | None) -> int:
    """A count of the status (0 when absent)."""
    return int(value or 0)


def _to(phase: str, retry: bool = False) -> Update:
    def update(status: VolcanoJobStatus, spec: VolcanoJobSpec) -> bool:
        if retry:
            status["retryCount"] = _count(status.get("retryCount")) + 1
        status.setdefault("state", {})["phase"] = phase
        return True

    return update


def _when_drained(phase: str) -> Update:
    """Move to `phase` once no pod is pending, running or terminating."""

    def update(status: VolcanoJobStatus, spec: VolcanoJobSpec) -> bool:
        if _count(status.get("terminating")) or _count(status.get("pending")) or _count(status.get("running")):
            return False
        status.setdefault("state", {})["phase"] = phase
        return True

    return update


def pending_update(status: VolcanoJobStatus, spec: VolcanoJobSpec) -> bool:
    """Pending -> Running once minAvailable pods run or have run."""
    started = _count(status.get("running")) + _count(status.get("succeeded")) + _count(status.get("failed"))
    if int(spec.get("minAvailable") or 0) <= started:
        status.setdefault("state", {})["phase"] = "Running"
        return True
    return False


def running_update(status: VolcanoJobStatus, spec: VolcanoJobSpec) -> bool:
    """Running -> Completed or Failed once every pod finished; back to Pending when too many wait."""
    total = total_replicas(spec)
    if total == 0:
        return False
    state = status.setdefault("state", {})
    succeeded, failed = _count(status.get("succeeded")), _count(status.get("failed"))
    min_success = spec.get("minSuccess")
    if min_success is not None and succeeded >= int(min_success):
        state["phase"] = "Completed"
        return True
    if succeeded + failed == total:
        if int(spec.get("minAvailable") or 0) >= sum(_task_min(t) for t in spec.get("tasks") or []):
            for task in spec.get("tasks") or []:
                if task.get("minAvailable") is None:
                    continue
                name = task.get("name") or ""  # no task state is kept under "" (pods name their task)
                counts = ((status.get("taskStatusCount") or {}).get(name) or {}).get("phase") or {}
                if name in (status.get("taskStatusCount") or {}) and int(counts.get("Succeeded") or 0) < int(
                    task["minAvailable"]
                ):
                    state["phase"] = "Failed"
                    return True
        if min_success is not None and succeeded < int(min_success):
            state["phase"] = "Failed"
        elif succeeded >= int(spec.get("minAvailable") or 0):
            state["phase"] = "Completed"
        else:
            state["phase"] = "Failed"
        return True
    if _count(status.get("pending")) > total - int(spec.get("minAvailable") or 0):
        state["phase"] = "Pending"
        return True
    return False


def restarting_update(status: VolcanoJobStatus, spec: VolcanoJobSpec) -> bool:
    """Restarting -> Failed past maxRetry, else Pending once enough old pods are gone."""
    state = status.setdefault("state", {})
    if _count(status.get("retryCount")) >= int(spec.get("maxRetry") or 0):
        state["phase"] = "Failed"
        return True
    if total_replicas(spec) - _count(status.get("terminating")) >= _count(status.get("minAvailable")):
        state["phase"] = "Pending"
        return True
    return False


_KILLS: dict[str, tuple[str, Update]] = {
    "RestartJob": (KILL_ALL, _to("Restarting", retry=True)),
    "AbortJob": (KILL_SOFT, _to("Aborting")),
    "CompleteJob": (KILL_SOFT, _to("Completing")),
    "TerminateJob": (KILL_SOFT, _to("Terminating")),
}


def plan(phase: str, action: str) -> tuple[str, Update | None]:
    """(how pods are treated, the status update) for `action` in `phase` (see the module docstring)."""
    if phase in ("", "Pending", "Running"):
        if action in _KILLS:
            return _KILLS[action]
        if action in RESTARTS:
            return KILL_TARGET, _to("Restarting", retry=True)
        return SYNC, pending_update if phase in ("", "Pending") else running_update
    if phase == "Restarting":
        if action == "SyncJob":
            return SYNC, restarting_update
        return (KILL_TARGET if action in RESTARTS else KILL_ALL), restarting_update
    if phase in ("Aborting", "Aborted") and action == "ResumeJob":
        return KILL_SOFT, _to("Restarting", retry=True)
    if phase == "Aborting":
        return KILL_SOFT, _when_drained("Aborted")
    if phase == "Completing":
        return KILL_SOFT, _when_drained("Completed")
    if phase == "Terminating":
        return KILL_SOFT, _when_drained("Terminated")
    return KILL_SOFT, None  # Aborted, Completed, Failed, Terminated: nothing left to do but tidy
