"""Status conditions as kube's controllers keep them (`SetDeploymentCondition` and its kin).

A condition is `{type, status, reason, message, lastUpdateTime, lastTransitionTime}`. Setting one
that already has the same status and reason changes nothing; a new reason with the same status
keeps the old `lastTransitionTime`. Pure functions on a status dict.
"""

from __future__ import annotations

from typing import Any

from runtimekit.kube.objects import JsonObject


def set_condition(status: dict[str, Any], kind: str, value: str, reason: str, message: str, now: str) -> None:
    """Put the condition of type `kind` into `status["conditions"]` (see the module docstring)."""
    conditions: list[JsonObject] = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and current.get("status") == value and current.get("reason") == reason:
        return
    condition: JsonObject = {
        "type": kind,
        "status": value,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    if current is not None and current.get("status") == value:
        condition["lastTransitionTime"] = current.get("lastTransitionTime", now)
    status["conditions"] = [*(c for c in conditions if c.get("type") != kind), condition]
