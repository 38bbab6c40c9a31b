"""What a session needs from the scheduler cache: a snapshot to work on and a way to carry out
committed decisions. The live cache (informers + API server) and the trace-replay cache both
implement it; see `runtimekit.scheduler.cache`."""

from __future__ import annotations

from typing import Protocol

from runtimekit.scheduler.framework.binding import BindGroup, BindHooks
from runtimekit.scheduler.framework.info import JobInfo, Snapshot, TaskInfo
from runtimekit.scheduler.framework.values import DeviceChoice


class Cache(Protocol):
    def snapshot(self) -> Snapshot:
        """A private copy of the cluster for one session."""

    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks, group: BindGroup | None = None) -> None:
        """Carry out a committed allocation: book it, run the PreBind plugins and bind the pod to
        `task.node` (a Bind plugin, else the cache's own binder), through `hooks`.

        `task.placement` holds what it takes. Failures are the cache's to handle: give the booking
        back, `hooks.unreserve(task)`, requeue; the session has already moved on. A task of a
        `group` (a gang committed together) binds only once every member's PreBind succeeded, and
        fails with the first member that fails (see `binding.BindGroup`)."""

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Carry out a committed eviction (delete the pod)."""

    def job_updated(self, job: JobInfo) -> None:
        """Told at session close about every job the session looked at (status, fit errors)."""
