"""What an action is: a step of every session, in the configured order (Volcano's `Action`).

Actions receive the whole `Session` (they drive statements); plugins only its `SessionView`.
"""

from __future__ import annotations

from typing import Protocol

from runtimekit.scheduler.framework.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None:
        """Run once per session, in the configured order."""
