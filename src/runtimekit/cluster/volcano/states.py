"""The Volcano Job state machine, as Volcano's job controller runs it (`pkg/controllers/job/state`).

`plan(phase, action)` says what one action does in one phase: how pods are treated (`SYNC` creates
the missing ones and counts; `KILL_ALL` deletes every pod; `KILL_SOFT` deletes all but Succeeded and
Failed ones; `KILL_TARGET` deletes the pods of one task or one pod) and the status update to apply
once the pods are counted (it returns True when the phase changed). Phases: Pending, Running,
Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated, Failed.
Pure functions on the Job's `status` and `spec`; `controller.py` does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SYNC, KILL_ALL, KILL_SOFT, KILL_TARGET = "sync", "kill-all", "kill-soft", "kill-target"
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
RESTARTS = frozenset({"RestartTask", "RestartPod", "RestartPartition"})

Update = Callable[[dict[str, Any], Mapping[str, Any]], bool]  # (status, job spec) -> phase changed


def total_replicas(spec: Mapping[str, Any]) -> int:
    return sum(int(t.get("replicas") or 0) for t in spec.get("tasks") or [])


def _task_min(task: Mapping[str, Any]) -> int:
    value = task.get("minAvailable")
    return int(value) if value is not None else int(task.get("replicas") or 0)


def _count(status: Mapping[str, Any], field: str) -> int:
    return int(status.get(field) or 0)


def _to(phase: str, retry: bool = False) -> Update:
    def update(status: dict[str, Any], spec: Mapping[str, Any]) -> bool:
        if retry:
            status["retryCount"] = _count(status, "retryCount") + 1
        status.setdefault("state", {})["phase"] = phase
        return True

    return update


def _when_drained(phase: str) -> Update:
    """Move to `phase` once no pod is pending, running or terminating."""

    def update(status: dict[str, Any], spec: Mapping[str, Any]) -> bool:
        if any(_count(status, f) for f in ("terminating", "pending", "running")):
            return False
        status.setdefault("state", {})["phase"] = phase
        return True

    return update


def pending_update(status: dict[str, Any], spec: Mapping[str, Any]) -> bool:
    """Pending -> Running once minAvailable pods run or have run."""
    if int(spec.get("minAvailable") or 0) <= sum(_count(status, f) for f in ("running", "succeeded", "failed")):
        status.setdefault("state", {})["phase"] = "Running"
        return True
    return False


def running_update(status: dict[str, Any], spec: Mapping[str, Any]) -> bool:
    """Running -> Completed or Failed once every pod finished; back to Pending when too many wait."""
    total = total_replicas(spec)
    if total == 0:
        return False
    state = status.setdefault("state", {})
    succeeded, failed = _count(status, "succeeded"), _count(status, "failed")
    min_success = spec.get("minSuccess")
    if min_success is not None and succeeded >= int(min_success):
        state["phase"] = "Completed"
        return True
    if succeeded + failed == total:
        if int(spec.get("minAvailable") or 0) >= sum(_task_min(t) for t in spec.get("tasks") or []):
            for task in spec.get("tasks") or []:
                if task.get("minAvailable") is None:
                    continue
                counts = ((status.get("taskStatusCount") or {}).get(task.get("name")) or {}).get("phase") or {}
                if task.get("name") in (status.get("taskStatusCount") or {}) and int(
                    counts.get("Succeeded") or 0
                ) < int(task["minAvailable"]):
                    state["phase"] = "Failed"
                    return True
        if min_success is not None and succeeded < int(min_success):
            state["phase"] = "Failed"
        elif succeeded >= int(spec.get("minAvailable") or 0):
            state["phase"] = "Completed"
        else:
            state["phase"] = "Failed"
        return True
    if _count(status, "pending") > total - int(spec.get("minAvailable") or 0):
        state["phase"] = "Pending"
        return True
    return False


def restarting_update(status: dict[str, Any], spec: Mapping[str, Any]) -> bool:
    """Restarting -> Failed past maxRetry, else Pending once enough old pods are gone."""
    state = status.setdefault("state", {})
    if _count(status, "retryCount") >= int(spec.get("maxRetry") or 0):
        state["phase"] = "Failed"
        return True
    if total_replicas(spec) - _count(status, "terminating") >= _count(status, "minAvailable"):
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
