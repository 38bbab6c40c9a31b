"""Helpers shared by the runtime tests (plain functions and values; the fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runtimekit.protocol import KitProtocol
from runtimekit.runtime.service import NodeRuntime

NODE = "node-a"


class FakeClock:
    """Seconds that only move when a test says so."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


RuntimeFactory = Callable[..., NodeRuntime]


def pod_manifest(
    name: str,
    uid: str,
    assignment: str | None = None,
    node: str = NODE,
    phase: str = "Running",
    namespace: str = "default",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if assignment is not None:
        notes[KitProtocol.default().annotations.assignment] = assignment
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "annotations": notes},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": phase},
    }
