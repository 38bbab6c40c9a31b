"""The pieces every server-side printer shares: column definitions, `Since` (a cell rendered as an
age per request), NAME and AGE, apimachinery's `HumanDuration`, and a path reader for JSON objects.
Pure; used by `printers`, `printcells` and `tables`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically."
)


class ColumnDefinition(TypedDict):
    """`meta.k8s.io/v1` TableColumnDefinition, as a Table's `columnDefinitions` lists it."""

    name: str
    type: str
    format: str
    description: str
    priority: int


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> ColumnDefinition:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Since:
    """A cell shown as the time elapsed since `timestamp` (kubectl's AGE and LAST SEEN)."""

    timestamp: str


NAME = Column("Name", format="name", description=NAME_DESCRIPTION)
AGE = Column(
    "Age", description="CreationTimestamp is a timestamp representing the server time when this object was created."
)


def human_duration(seconds: float) -> str:
    """apimachinery's `duration.HumanDuration`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y" if days % 365 == 0 else f"{years}y{days % 365}d"
    return f"{years}y"


def get_path(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):  # objects come from JSON: dicts (cheaper to test than Mapping)
            return None
        obj = obj.get(part)
    return obj


def created(obj: Mapping[str, object]) -> Since:
    return Since(str(get_path(obj, "metadata", "creationTimestamp") or ""))
