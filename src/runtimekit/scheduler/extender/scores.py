"""The framework's node scores as kube-scheduler's extender scores: integers from 0 to 10
(`MaxExtenderPriority`), which kube-scheduler multiplies by the extender's weight and by 10 and adds
to its own plugins' scores. Called by the extender's prioritize.

The node the standalone scheduler would choose (`Session.best_node`: a plugin's choice, else the top
score with ties to the lowest rank) scores 10 and every other node at most 9, so it stays the
extender's one first choice; the others get 0 to 9 in proportion to their place between the lowest
and the highest score. Eleven levels cannot carry the policies' fine differences, but the first
choice is what the standalone scheduler would bind, and with a weight that dominates kube-scheduler's
own scores (`docs/user-guide/extender.md`) kube-scheduler binds it too.
"""

from __future__ import annotations

import numpy as np

from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.framework.values import Scores

MAX_SCORE = 10  # extenderv1.MaxExtenderPriority
RUNNER_UP = MAX_SCORE - 1  # the most any node but the first choice gets


def extender_scores(scores: Scores, best: int) -> IntArray:
    """`scores` (per node, any range, higher is better) as 0..10, with the node at index `best` alone
    at 10; a score that is not finite counts as the lowest."""
    out = np.full(scores.size, RUNNER_UP, np.int64)
    if scores.size == 0:
        return out
    finite = np.isfinite(scores)
    if finite.any():
        low, high = float(scores[finite].min()), float(scores[finite].max())
        if high > low:
            clean = np.where(finite, scores, low)
            out = np.floor(RUNNER_UP * (clean - low) / (high - low)).clip(0, RUNNER_UP).astype(np.int64)
    out[best] = MAX_SCORE
    return out
