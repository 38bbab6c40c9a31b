"""Which of some nodes a pod fits, and why each other one does not: the session's feasibility check
(pre-predicates, resource fit, predicates: `Session.feasible`, in the same order and with the same
plugins) with a reason per failing node instead of counts, since kube-scheduler's extender API wants
a message per node (`FailedNodes`) and the nodes no eviction helps apart
(`FailedAndUnresolvableNodes`). Callers: the extender's filter, prioritize, bind and preempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import Code, FitErrors
from runtimekit.scheduler.framework.values import Mask, Verdict


@dataclass
class RowVerdicts:
    """The rows that pass, in the order given; the failing rows in groups, each with its reason; the
    failing rows eviction cannot help (`unresolvable`); `error` when the check itself failed (a
    plugin's ERROR: the attempt should be retried). Groups, not a row each: thousands of nodes may
    fail for one reason, and a call must stay in milliseconds."""

    passed: IntArray
    failed: list[tuple[IntArray, str]] = field(default_factory=list)
    unresolvable: list[IntArray] = field(default_factory=list)
    error: str = ""

    def reason(self, row: int) -> str:
        """Why `row` fails ("" when it does not)."""
        return next((why for rows, why in self.failed if row in rows.tolist()), "")

    def hopeless(self) -> IntArray:
        """Every failing row eviction cannot help."""
        if not self.unresolvable:
            return np.zeros(0, np.int64)
        return np.concatenate(self.unresolvable)


def check_rows(ssn: Session, task: TaskInfo, rows: IntArray) -> RowVerdicts:
    """Every check the session runs for `task`, over `rows` only."""
    status, skip = ssn.pre_predicate(task)
    if not status.ok:
        out = RowVerdicts(rows[:0], [(rows, status.message)])
        if status.code is Code.UNRESOLVABLE:
            out.unresolvable = [rows]
        elif status.code is Code.ERROR:
            out.error = status.message
        return out
    out = RowVerdicts(rows)
    fitting = ssn.resource_fit(task, rows, FitErrors(nodes=int(rows.size)))
    if fitting.size != rows.size:
        for row in np.setdiff1d(rows, fitting, assume_unique=True).tolist():
            out.failed.append((np.array([row], np.int64), _resource_reason(ssn, task, row)))
        rows = rows[np.isin(rows, fitting, assume_unique=True)]  # in the order given
    for plugin in ssn.plugins.predicate.flat:
        if rows.size == 0:
            break
        if skip and plugin.name in skip:
            continue
        verdict = plugin.predicate(task, rows, ssn.view)
        passed = verdict.passed
        if np.count_nonzero(passed) == passed.size:
            continue
        _note(out, plugin.name, rows, verdict)
        rows = rows[passed]
    out.passed = rows
    return out


def _note(out: RowVerdicts, plugin: str, rows: IntArray, verdict: Verdict) -> None:
    """The failing rows of `verdict` (over `rows`), each with the first reason that covers it."""
    left = ~verdict.passed
    reasons = verdict.reasons() if callable(verdict.reasons) else verdict.reasons
    for reason, mask in reasons:
        hit = left & np.asarray(mask, np.bool_)
        if hit.any():
            out.failed.append((rows[hit], f"{plugin}: {reason}"))
            left &= ~hit
    if left.any():
        out.failed.append((rows[left], f"rejected by {plugin}"))
    hopeless: Mask | None = verdict.unresolvable() if callable(verdict.unresolvable) else verdict.unresolvable
    if hopeless is not None:
        found = rows[np.asarray(hopeless, np.bool_) & ~verdict.passed]
        if found.size:
            out.unresolvable.append(found)


def _resource_reason(ssn: Session, task: TaskInfo, row: int) -> str:
    """Why one row fails the resource fit, as kube-scheduler words it (every short resource)."""
    errors = FitErrors(nodes=1)
    ssn.resource_fit(task, np.array([row], np.int64), errors)
    return ", ".join(sorted(errors.reasons)) or "Insufficient resources"
