"""What a plugin sees of a session: a read-only view (kube-scheduler hands its plugins a
`framework.Handle` and a snapshot lister, never the scheduler itself).

Plugins read the node table, the snapshot (node metadata, capacity, queue totals), the jobs and
queues of the cycle; they never change them — every change goes through the actions' statements.
What plugins work out for one cycle and share they keep in its `state` (typed keys, `state.py`).
A session hands its plugins a `CycleView` (`Session.view`), which holds these parts and nothing
else: no path from it leads to the cache, the binder or the assignment key the binder signs with
(docs/security.md#custom-plugins). Tests may pass anything with these attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from runtimekit.model import NodeTable
from runtimekit.scheduler.framework.info import JobInfo, JobKey, QueueInfo, Snapshot
from runtimekit.scheduler.framework.state import CycleState


class SessionView(Protocol):
    @property
    def state(self) -> CycleState:
        """This cycle's state, shared by its plugins: fresh when the session opens, emptied when it
        closes (kube-scheduler's CycleState)."""

    @property
    def snapshot(self) -> Snapshot:
        """The cycle's snapshot: node metadata (`meta`, `rank`, models), capacity, queue totals."""

    @property
    def table(self) -> NodeTable:
        """The cycle's node table (free and total resources per row). Read it, do not change it."""

    @property
    def jobs(self) -> Mapping[JobKey, JobInfo]:
        """The cycle's jobs with their tasks."""

    @property
    def queues(self) -> Mapping[str, QueueInfo]:
        """The cycle's queues by name."""

    @property
    def now(self) -> float:
        """The snapshot's time (seconds since the epoch; trace time in replays)."""


@dataclass(frozen=True, slots=True)
class CycleView:
    """The `SessionView` a session hands its plugins: the cycle's state and its snapshot's parts."""

    state: CycleState
    snapshot: Snapshot
    table: NodeTable
    jobs: Mapping[JobKey, JobInfo]
    queues: Mapping[str, QueueInfo]
    now: float
