"""Status conditions as kube's controllers keep them (`SetDeploymentCondition` and its kin).

A condition is `{type, status, reason, message, lastUpdateTime, lastTransitionTime}`. Setting one
that already has the same status and reason changes nothing; a new reason with the same status
keeps the old `lastTransitionTime`. `condition` finds one by type. Pure functions on a Deployment's
status; callers: the Deployment controller.
"""

from __future__ import annotations

from runtimekit.kube.objects import Condition, DeploymentStatus


def condition(status: DeploymentStatus, kind: str) -> Condition | None:
    """The condition of type `kind` in `status`, or None."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(
    status: DeploymentStatus, kind: str, value: str, reason: str, message: str, now: str, since: str = ""
) -> None:
    """Put the condition of type `kind` into `status["conditions"]` (see the module docstring).
    `since`, when given, is the `lastTransitionTime` a new condition gets instead of `now`."""
    conditions = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and current.get("status") == value and current.get("reason") == reason:
        return
    made: Condition = {
        "type": kind,
        "status": value,
        "lastUpdateTime": now,
        "lastTransitionTime": since or now,
        "reason": reason,
        "message": message,
    }
    if current is not None and current.get("status") == value:
        made["lastTransitionTime"] = current.get("lastTransitionTime", now)
    status["conditions"] = [*(c for c in conditions if c.get("type") != kind), made]
