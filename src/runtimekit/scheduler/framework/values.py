"""Value types that flow between the framework and its plugins: rows of the node table, masks and
scores over them, votes, a batch predicate's verdict and a device choice. A leaf module: it imports
nothing of the framework, so every other framework module (and every plugin) can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from runtimekit.model import Slot

Rows = npt.NDArray[np.int64]  # node table rows, ascending
Mask = npt.NDArray[np.bool_]  # one flag per row of a Rows array
Scores = npt.NDArray[np.float64]  # one score per row of a Rows array (higher is better)
Reasons = list[tuple[str, Mask]]


class Vote(IntEnum):
    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


@dataclass
class Verdict:
    """A batch predicate's answer: which of the given rows pass, and why the others do not.

    `reasons` pairs a reason with the rows (a mask over the given rows) it explains, either as a
    list or as a function returning it (called only when someone reads the reasons); a failing
    row that no reason covers is reported as the plugin's generic rejection. `passed` is the
    verdict's own: the plugin does not change it afterwards (reasons are counted from it later).
    `unresolvable` marks the failing rows that preemption cannot turn into fits (a selector, a
    taint, a GPU model), as kube-scheduler's UnschedulableAndUnresolvable.
    """

    passed: Mask
    reasons: Reasons | Callable[[], Reasons] = field(default_factory=list)
    # failing rows no eviction can help, or a function giving them when asked (None: none of them)
    unresolvable: Mask | Callable[[], Mask] | None = None

    @classmethod
    def all(cls, count: int) -> Verdict:
        return cls(np.ones(count, np.bool_))


@dataclass(frozen=True)
class DeviceChoice:
    """Which devices inside the chosen node each container of a task takes."""

    containers: tuple[tuple[str, tuple[Slot, ...]], ...] = ()
    policy: str = ""

    @property
    def slots(self) -> tuple[Slot, ...]:
        if len(self.containers) == 1:
            return self.containers[0][1]
        return tuple(slot for _, slots in self.containers for slot in slots)
