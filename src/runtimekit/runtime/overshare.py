"""A Warning Event on a pod when one of its containers uses more than its GPU share.

`OverShare.observe` gets every reading's per-container usage (`usage.ContainerUsage.over_share`: memory
used above the memory granted, or SM utilisation more than `usage.CORE_SLACK_PERCENT` points above the
compute share). A container that goes over gets one `GPUShareExceeded` Event on its pod; while it stays
over, further readings write nothing (so scrapes never flood the API server with Events); once it is
back within its share, a new excess is a new Event. Containers that disappeared are forgotten.
Caller: `service.NodeRuntime.exporter_data`. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from runtimekit.runtime.pods import EventSink
from runtimekit.runtime.usage import ContainerUsage

REASON = "GPUShareExceeded"


def describe(usage: ContainerUsage) -> str:
    """Why a container is over its share, for the Event and the log."""
    parts = []
    if usage.over_memory:
        parts.append(f"uses {usage.memory_used_mib} MiB of GPU memory, {usage.memory_mib} MiB granted")
    if usage.over_core:
        parts.append(f"uses {usage.sm_percent:.0f}% of the GPU's SMs, {usage.core_milli / 10:.0f}% granted")
    return f"container {usage.container} on GPU {usage.device_uuid} " + " and ".join(parts)


class OverShare:
    """See the module docstring. `events` None: nothing is written (tests, no API server)."""

    def __init__(self, events: EventSink | None, node: str) -> None:
        self._events = events
        self._node = node
        self._over: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def observe(self, containers: Sequence[ContainerUsage]) -> list[ContainerUsage]:
        """Record the reading; returns the containers that went over with it (an Event each)."""
        over = {(u.pod_uid, u.container, u.device_uuid): u for u in containers if u.over_share}
        with self._lock:
            new = [u for key, u in over.items() if key not in self._over]
            self._over = set(over)
        if self._events is not None:
            for u in new:
                message = f"{describe(u)} (node {self._node})"
                self._events.record_pod_event(u.namespace, u.pod, u.pod_uid, "Warning", REASON, message)
        return new
