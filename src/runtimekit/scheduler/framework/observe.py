"""What the framework tells an observer (the scheduler's metrics) while it works, and what plugins
that share the cluster between queues report about them.

`Observer` is told how long sessions, their opening, each action and each plugin's session hooks
took, how long a task's predicates and scoring took, how long a decision took under which policy,
and about preemption. Every call is optional for the framework: with no observer nothing is timed.
A plugin implementing `ReportsQueues` (proportion) hands over its per-queue figures at session
close; the metrics read the latest at scrape time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from runtimekit.scheduler.framework.info import Resources

# Volcano's label values (pkg/scheduler/metrics): plugin hooks and per-task stages.
ON_SESSION_OPEN, ON_SESSION_CLOSE = "OnSessionOpen", "OnSessionClose"
STAGE_PREDICATE, STAGE_SCORING = "Predicate", "Scoring"


class Observer(Protocol):
    def session_opened(self, seconds: float) -> None:
        """A session's snapshot was taken and every plugin's on_session_open has run."""

    def plugin_done(self, plugin: str, hook: str, seconds: float) -> None:
        """One plugin's on_session_open or on_session_close (`ON_SESSION_OPEN` / `ON_SESSION_CLOSE`)."""

    def action_done(self, action: str, seconds: float) -> None:
        """One action's execute."""

    def session_done(self, seconds: float) -> None:
        """A whole session: open, every action, close."""

    def stage_done(self, stage: str, seconds: float) -> None:
        """One task's predicates (`STAGE_PREDICATE`) or scoring (`STAGE_SCORING`)."""

    def decided(self, policy: str, seconds: float) -> None:
        """One task placed by allocate: predicates, scores and device choice, under `policy`."""

    def preemption_attempt(self) -> None:
        """A preemptor task looked for victims."""

    def evicted(self, action: str, victims: int) -> None:
        """A committed statement of `action` (preempt, reclaim) evicted `victims` pods."""


@dataclass(frozen=True)
class QueueFigures:
    """A queue as a queue-sharing plugin saw it at session close (Volcano's queue metrics)."""

    request: Resources
    inqueue: Resources
    deserved: Resources
    capability: Resources | None  # as configured; None: unlimited
    real_capability: Resources  # the capability with the cluster's size applied
    share: float
    weight: int
    overused: bool


@runtime_checkable
class ReportsQueues(Protocol):
    def queue_figures(self) -> Mapping[str, QueueFigures]:
        """Per queue name, what the plugin worked out this session (called at session close)."""
