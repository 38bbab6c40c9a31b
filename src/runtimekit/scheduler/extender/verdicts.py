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
    """The rows that pass, in the order given; per failing row its reason, and whether eviction could
    help it; `error` when the check itself failed (a plugin's ERROR: the attempt should be retried)."""

    passed: IntArray
    failed: dict[int, str] = field(default_factory=dict)
    unresolvable: set[int] = field(default_factory=set)
    error: str = ""

    def reason(self, row: int) -> str:
        return self.failed.get(row, "")


def check_rows(ssn: Session, task: TaskInfo, rows: IntArray) -> RowVerdicts:
    """Every check the session runs for `task`, over `rows` only."""
    status, skip = ssn.pre_predicate(task)
    if not status.ok:
        out = RowVerdicts(rows[:0], dict.fromkeys(rows.tolist(), status.message))
        if status.code is Code.UNRESOLVABLE:
            out.unresolvable = set(out.failed)
        elif status.code is Code.ERROR:
            out.error = status.message
        return out
    out = RowVerdicts(rows)
    fitting = ssn.resource_fit(task, rows, FitErrors(nodes=int(rows.size)))
    if fitting.size != rows.size:
        for row in np.setdiff1d(rows, fitting, assume_unique=True).tolist():
            out.failed[row] = _resource_reason(ssn, task, row)
        rows = rows[np.isin(rows, fitting, assume_unique=True)]  # in the order given
    for plugin in ssn.plugins.predicate.flat:
        if rows.size == 0:
            break
        if skip and plugin.name in skip:
            continue
        verdict = plugin.predicate(task, rows, ssn)
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
        for row in rows[hit].tolist():
            out.failed[row] = f"{plugin}: {reason}"
        left &= ~hit
    for row in rows[left].tolist():
        out.failed[row] = f"rejected by {plugin}"
    hopeless: Mask | None = verdict.unresolvable() if callable(verdict.unresolvable) else verdict.unresolvable
    if hopeless is not None:
        out.unresolvable.update(rows[np.asarray(hopeless, np.bool_) & ~verdict.passed].tolist())


def _resource_reason(ssn: Session, task: TaskInfo, row: int) -> str:
    """Why one row fails the resource fit, as kube-scheduler words it (every short resource)."""
    errors = FitErrors(nodes=1)
    ssn.resource_fit(task, np.array([row], np.int64), errors)
    return ", ".join(sorted(errors.reasons)) or "Insufficient resources"
