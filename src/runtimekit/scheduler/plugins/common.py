"""Small helpers shared by the built-in plugins."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtimekit.scheduler.framework.arguments import ArgumentError


def no_arguments(plugin: str, arguments: Mapping[str, Any], accepted: Iterable[str] = ()) -> None:
    """Refuse arguments a plugin does not take (naming the first); `accepted` are Volcano keys that
    are read elsewhere or have no effect here and are let through so Volcano confs load unchanged."""
    allowed = set(accepted)
    unknown = sorted(k for k in arguments if k not in allowed)
    if unknown:
        raise ArgumentError(f"{plugin}: unknown argument {unknown[0]!r}")
