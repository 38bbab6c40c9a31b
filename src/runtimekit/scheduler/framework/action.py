"""What an action is: a step of every session, in the configured order (Volcano's `Action`).

Actions receive the whole `Session` (they drive statements); plugins only its `SessionView`.
An action that looks at running pods (preempt, reclaim) says so with `NeedsRunning`; the framework
reads it once, when it is built (`Framework.needs_running`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from runtimekit.scheduler.framework.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None:
        """Run once per session, in the configured order."""


@runtime_checkable
class NeedsRunning(Protocol):
    """An action that looks at running pods sets `needs_running = True`: the live scheduler then
    puts every job with pods into each session, not only the jobs with pods waiting (which is
    cheaper, and all that allocate and backfill need)."""

    needs_running: bool
