"""What an action is: a step of every session, in the configured order (Volcano's `Action`).

Actions receive the whole `Session` (they drive statements); plugins only its `SessionView`.
An action that looks at running pods (preempt, reclaim) sets a class attribute `needs_running =
True`: the live scheduler then puts every job with pods into each session, not only the jobs with
pods waiting (which is cheaper, and all that allocate and backfill need).
"""

from __future__ import annotations

from typing import Protocol

from runtimekit.scheduler.framework.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None:
        """Run once per session, in the configured order."""
