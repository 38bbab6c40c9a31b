"""`metav1.LabelSelector` as the workload kinds carry it (`matchLabels`, `matchExpressions`).

`matches` is what the controllers use to claim pods and ReplicaSets, `to_string` the form a
Scale's `status.selector` and a list's `labelSelector` take, `problems` what the API server
refuses. An empty selector matches everything (as `LabelSelectorAsSelector` does); a missing one
(None) matches nothing. Pure functions; used by the API server and the workload controllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _expressions(selector: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [e for e in selector.get("matchExpressions") or [] if isinstance(e, Mapping)]


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` satisfy the selector (None selects nothing, {} everything)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in _expressions(selector):
        key, operator = str(expression.get("key", "")), expression.get("operator")
        values = [str(v) for v in expression.get("values") or []]
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def to_string(selector: Mapping[str, Any] | None) -> str:
    """The selector in the text form of `?labelSelector=` (`app=web,tier in (a,b)`), keys sorted."""
    if not selector:
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in sorted(_expressions(selector), key=lambda e: str(e.get("key", ""))):
        key, operator = str(expression.get("key", "")), expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or []))
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }.get(str(operator), key)
        )
    return ",".join(terms)


def problems(selector: object) -> list[str]:
    """What is wrong with a selector (empty when nothing): a bad operator, values where none belong."""
    if not isinstance(selector, Mapping):
        return ["must be an object with matchLabels and/or matchExpressions"]
    found: list[str] = []
    if not isinstance(selector.get("matchLabels") or {}, Mapping):
        found.append("matchLabels must be a map of label keys to values")
    for expression in selector.get("matchExpressions") or []:
        operator = expression.get("operator") if isinstance(expression, Mapping) else None
        if operator not in OPERATORS:
            found.append(f"{operator!r} is not a valid label selector operator")
            continue
        values = expression.get("values") or []
        if operator in ("In", "NotIn") and not values:
            found.append(f"values: Required value: must be specified when `operator` is '{operator}'")
        if operator in ("Exists", "DoesNotExist") and values:
            found.append(f"values: Forbidden: may not be specified when `operator` is '{operator}'")
    return found


def is_empty(selector: Mapping[str, Any] | None) -> bool:
    """True for a selector with no requirements (it would select every object)."""
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))
