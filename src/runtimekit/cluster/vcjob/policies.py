"""Which action a Volcano Job takes for an event (Volcano's `applyPolicies`).

A `Request` is what a pod or job change means: an event (PodFailed, PodEvicted, PodPending,
PodRunning, TaskCompleted, TaskFailed, Unknown, OutOfSync), the task and pod it concerns, the exit
code of a failed pod's first container, and the job version the pod was made for. `action_for` looks
at the task's policies first, then the job's: a policy matches by event (or `*`) or by exit code; a
PodPending policy needs a `timeout`. Internal events and requests from pods of an older job version
only sync. The result is (action, delay in seconds). Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtimekit.kube.objects import LifecyclePolicy, VolcanoJob

INTERNAL = frozenset({"OutOfSync", "CommandIssued", "PodRunning"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Request:
    """One thing that happened to a job (see the module docstring)."""

    job: str  # namespace/name
    event: str = "OutOfSync"
    task: str = ""
    pod: str = ""
    exit_code: int = 0
    version: int = -1  # -1: not from a pod
    action: str = ""  # given: this action, whatever the policies say


def timeout_seconds(text: object) -> float:
    """Seconds of a Go duration such as `5m` or `1m30s` (0 for none or nonsense)."""
    if not isinstance(text, str):
        return 0.0
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(text))


def _events(policy: LifecyclePolicy) -> list[str]:
    return [*(policy.get("events") or []), *([policy["event"]] if policy.get("event") else [])]


def _match(policies: list[LifecyclePolicy], request: Request) -> tuple[str, float] | None:
    for policy in policies:
        events = _events(policy)
        matched = bool(events) and (request.event in events or "*" in events)
        if matched and (request.event != "PodPending" or policy.get("timeout") is not None):
            return str(policy.get("action")), timeout_seconds(policy.get("timeout"))
        code = policy.get("exitCode")
        if code is not None and int(code) == request.exit_code:
            return str(policy.get("action")), timeout_seconds(policy.get("timeout"))
    return None


def action_for(job: VolcanoJob, request: Request) -> tuple[str, float]:
    """(action, delay seconds) for the request (see the module docstring)."""
    if request.action:
        return request.action, 0.0
    if request.event in INTERNAL or not request.event:
        return "SyncJob", 0.0
    version = int(((job.get("status") or {}).get("version")) or 0)
    if 0 <= request.version < version:
        return "SyncJob", 0.0  # a pod of an earlier run of the job
    spec = job.get("spec") or {}
    if request.task:
        for task in spec.get("tasks") or []:
            if task.get("name") == request.task:
                found = _match(list(task.get("policies") or []), request)
                if found is not None:
                    return found
                break
    return _match(list(spec.get("policies") or []), request) or ("SyncJob", 0.0)
