"""A Warning Event on a pod when one of its containers uses more than its GPU share.

`OverShare.observe` gets every reading's per-container usage (`usage.ContainerUsage.over_share`: memory
used above the memory granted, or SM utilisation more than `usage.CORE_SLACK_PERCENT` points above the
compute share). A container that goes over gets a `GPUShareExceeded` Event on its pod at once; while it
stays over, the Event is written again at most every `repeat_s` (`--share-event-interval`, default
`REPEAT_S`), never at every scrape. The message
names what is exceeded and the grant, not the amounts used, so the Event sink counts the repeats on one
Event as Kubernetes does (`kube.nodeapi.KubeNodeApi.record_pod_event` bumps `count`). Containers back
within their share, or gone, are forgotten. Caller: `service.NodeRuntime.exporter_data`. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from runtimekit.runtime.pods import EventSink
from runtimekit.runtime.usage import ContainerUsage

REASON = "GPUShareExceeded"
REPEAT_S = 60.0


def describe(usage: ContainerUsage) -> str:
    """What a container exceeds, for the Event (stable while the same limit is exceeded)."""
    parts = []
    if usage.over_memory:
        parts.append(f"GPU memory above the {usage.memory_mib} MiB granted")
    if usage.over_core:
        parts.append(f"SM utilisation above the {usage.core_milli / 10:.0f}% granted")
    return f"container {usage.container} uses more than its share of GPU {usage.device_uuid}: " + " and ".join(parts)


class OverShare:
    """See the module docstring. `events` None: nothing is written (no API server)."""

    def __init__(
        self,
        events: EventSink | None,
        node: str,
        clock: Callable[[], float] = time.monotonic,
        repeat_s: float = REPEAT_S,
    ) -> None:
        self._events = events
        self._repeat_s = repeat_s
        self._node = node
        self._clock = clock
        self._written: dict[tuple[str, str, str], float] = {}  # over-share container -> when last written
        self._lock = threading.Lock()

    def observe(self, containers: Sequence[ContainerUsage]) -> list[ContainerUsage]:
        """Record one reading; returns the containers an Event was written for with it."""
        now = self._clock()
        over = {(u.pod_uid, u.container, u.device_uuid): u for u in containers if u.over_share}
        with self._lock:
            due = [
                u for key, u in over.items() if key not in self._written or now - self._written[key] >= self._repeat_s
            ]
            self._written = {key: self._written.get(key, now) for key in over}
            for u in due:
                self._written[(u.pod_uid, u.container, u.device_uuid)] = now
        if self._events is not None:
            for u in due:
                message = f"{describe(u)} (node {self._node})"
                self._events.record_pod_event(u.namespace, u.pod, u.pod_uid, "Warning", REASON, message)
        return due
