"""The runtime's view of its GPUs: the backend's devices plus health, XID history and a watch generation.

`DeviceTable` turns health events into health (NVIDIA's policy: a critical XID, an uncorrectable
ECC error, a lost GPU or a failed event source mark a GPU unhealthy; the application XIDs 13, 31, 43,
45, 68, 109 and corrected ECC errors are only recorded; `GPU back` and `SetDeviceHealth(healthy)` make
it healthy again; the latest word wins). Every change (health, or MIG devices made and destroyed)
bumps a generation and wakes watchers, which is how WatchDevices streams follow within
milliseconds. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from runtimekit.model import GpuUUID
from runtimekit.model.gpu import offered_memory_mib
from runtimekit.runtime.backend import DeviceInfo, EventKind, HealthEvent

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
XID_HISTORY = 256


def offered(devices: Iterable[DeviceInfo], memory_scaling: float) -> list[DeviceInfo]:
    """The backend's GPUs as the runtime offers them: each GPU's memory times `rules.memoryScaling`
    (HAMi's deviceMemoryScaling), which every view takes (the allocation book, the device plugin's
    inventory, the isolation limits), as HAMi's device plugin registers the scaled memory."""
    return [replace(d, memory_mib=offered_memory_mib(d.memory_mib, d.mig_mode, memory_scaling)) for d in devices]


@dataclass(frozen=True)
class XidRecord:
    xid: int
    unix_ms: int


@dataclass(frozen=True)
class DeviceView:
    """A GPU with its current health."""

    info: DeviceInfo
    healthy: bool = True
    reason: str = ""


@dataclass(frozen=True)
class DeviceSnapshot:
    generation: int
    devices: tuple[DeviceView, ...]

    def by_uuid(self, uuid: str) -> DeviceView | None:
        return next((d for d in self.devices if d.info.uuid == uuid), None)


def health_change(event: HealthEvent, ignored_xids: frozenset[int] = APPLICATION_XIDS) -> tuple[bool, str] | None:
    """(healthy, reason) an event sets, or None when it only gets recorded."""
    if event.kind is EventKind.XID:
        return None if event.xid in ignored_xids else (False, f"XID {event.xid}")
    if event.kind is EventKind.ECC:
        return (False, "uncorrectable ECC error") if event.uncorrectable else None
    if event.kind is EventKind.LOST:
        return False, "GPU lost"
    if event.kind is EventKind.BACK:
        return True, "GPU back"
    return False, f"health events failed: {event.detail}" if event.detail else "health events failed"


class DeviceTable:
    """Devices, health and XID history; see the module docstring."""

    def __init__(self, devices: Sequence[DeviceInfo], ignored_xids: frozenset[int] = APPLICATION_XIDS) -> None:
        self._cond = threading.Condition()
        self._ignored = ignored_xids
        self._views = {d.uuid: DeviceView(d) for d in devices}
        self._order = [d.uuid for d in devices]
        self._xids: dict[GpuUUID, deque[XidRecord]] = {d.uuid: deque(maxlen=XID_HISTORY) for d in devices}
        self._xid_counts: dict[GpuUUID, int] = dict.fromkeys(self._order, 0)
        self._generation = 1
        self._closed = False
        self._wakes = 0  # counts `wake` calls, so a waiter returns on one though nothing changed
        self._listeners: list[Callable[[DeviceView], None]] = []

    def on_health_change(self, listener: Callable[[DeviceView], None]) -> None:
        """Call `listener` (outside the table's lock) after a GPU's health changes."""
        self._listeners.append(listener)

    def snapshot(self) -> DeviceSnapshot:
        with self._cond:
            return DeviceSnapshot(self._generation, tuple(self._views[u] for u in self._order))

    def get(self, uuid: str) -> DeviceView | None:
        with self._cond:
            return self._views.get(GpuUUID(uuid))

    def by_index(self, index: int) -> DeviceView | None:
        with self._cond:
            return next((v for v in self._views.values() if v.info.index == index), None)

    def xids(self, uuid: GpuUUID) -> tuple[tuple[XidRecord, ...], int]:
        """The recent XID events of a GPU and how many there were in all."""
        with self._cond:
            return tuple(self._xids.get(uuid, ())), self._xid_counts.get(uuid, 0)

    def wait_change(self, after: int, timeout_s: float) -> DeviceSnapshot | None:
        """The snapshot once the generation is past `after`; None on timeout or close."""
        with self._cond:
            wakes = self._wakes
            if not self._cond.wait_for(
                lambda: self._generation > after or self._closed or self._wakes != wakes, timeout_s
            ):
                return None
            if self._closed or self._generation <= after:
                return None
            return DeviceSnapshot(self._generation, tuple(self._views[u] for u in self._order))

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wake every watcher for good (the runtime is stopping)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake watchers without a change (their `wait_change` returns None), so they can notice their
        client has gone or that they are to stop."""
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    def apply(self, event: HealthEvent) -> list[DeviceView]:
        """Record a backend event; returns the GPUs whose health changed."""
        targets: Iterable[GpuUUID] = self._order if event.uuid is None else [event.uuid]
        change = health_change(event, self._ignored)
        changed = []
        with self._cond:
            for uuid in targets:
                if uuid not in self._views:
                    continue
                if event.kind is EventKind.XID:
                    self._xids[uuid].append(XidRecord(event.xid, event.unix_ms))
                    self._xid_counts[uuid] += 1
                if change is not None and self._set(uuid, *change):
                    changed.append(self._views[uuid])
        self._notify(changed)
        return changed

    def update_infos(self, devices: Sequence[DeviceInfo]) -> bool:
        """Take the GPUs' current properties (their MIG devices after one was made or destroyed),
        keeping health; True when anything changed (watchers are woken)."""
        with self._cond:
            changed = False
            for info in devices:
                old = self._views.get(info.uuid)
                if old is not None and old.info != info:
                    self._views[info.uuid] = replace(old, info=info)
                    changed = True
            if changed:
                self._generation += 1
                self._cond.notify_all()
        return changed

    def set_health(self, uuid: str, healthy: bool, reason: str) -> DeviceView:
        """Mark a GPU healthy or unhealthy (SetDeviceHealth). KeyError for an unknown UUID."""
        with self._cond:
            key = GpuUUID(uuid)
            if key not in self._views:
                raise KeyError(uuid)
            changed = self._set(key, healthy, reason)
            view = self._views[key]
        self._notify([view] if changed else [])
        return view

    def _set(self, uuid: GpuUUID, healthy: bool, reason: str) -> bool:
        old = self._views[uuid]
        if old.healthy == healthy and old.reason == reason:
            return False
        self._views[uuid] = replace(old, healthy=healthy, reason=reason)
        self._generation += 1
        self._cond.notify_all()
        return old.healthy != healthy

    def _notify(self, changed: list[DeviceView]) -> None:
        for view in changed:
            for listener in self._listeners:
                listener(view)
