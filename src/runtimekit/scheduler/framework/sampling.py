"""How many feasible nodes a task's scoring looks at: Volcano's `--percentage-nodes-to-find`,
`--minimum-percentage-nodes-to-find` and `--minimum-feasible-nodes` (kube-scheduler's
percentageOfNodesToScore), for large clusters where scoring every feasible node costs more than it
gains.

`NodeSampling.count(n)` is Volcano's CalculateNumOfFeasibleNodesToFind: every node up to the
minimum (100) or at 100 %; otherwise the percentage of the nodes (0: adaptive, 50 % less one point
per 125 nodes, not below the minimum percentage), and never fewer than the minimum. `NodeSampler`
keeps, as Volcano and kube-scheduler do, where the last search stopped, so that each search starts
there and every node gets the same chance across tasks: the nodes taken are the first `count`
feasible ones in node order from that point. The predicates here run over all nodes at once, so the
saving is in scoring; the placements only change when sampling is configured (the session has no
sampler otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtimekit.scheduler.framework.values import Rows

BASELINE_PERCENTAGE = 50  # Volcano's baselinePercentageOfNodesToFind


@dataclass(frozen=True)
class NodeSampling:
    percentage: int = 0  # of all nodes; 0 or less: adaptive
    min_percentage: int = 5
    min_nodes: int = 100

    def count(self, nodes: int) -> int:
        """How many feasible nodes to find among `nodes`."""
        if nodes <= self.min_nodes or self.percentage >= 100:
            return nodes
        percentage = self.percentage
        if percentage <= 0:
            percentage = max(BASELINE_PERCENTAGE - nodes // 125, self.min_percentage)
        return max(nodes * percentage // 100, self.min_nodes)


class NodeSampler:
    """A `NodeSampling` and the node where the next search starts (kept across sessions)."""

    def __init__(self, sampling: NodeSampling) -> None:
        self.sampling = sampling
        self.next_start = 0

    def take(self, candidates: Rows, feasible: Rows) -> Rows:
        """The first `count` feasible rows from the rotating start, in `candidates` order (both sorted
        ascending, `feasible` a subset); moves the start past the last node examined."""
        total = candidates.size
        if total == 0:
            return feasible
        wanted = self.sampling.count(total)
        start = self.next_start % total
        if feasible.size <= wanted:
            self.next_start = start  # every node was examined: the next search starts at the same place
            return feasible
        positions = np.searchsorted(candidates, feasible)  # each feasible row's place among the candidates
        rotated = (positions - start) % total
        order = np.argsort(rotated, kind="stable")[:wanted]
        last = int(rotated[order[-1]])
        self.next_start = (start + last + 1) % total
        return np.sort(feasible[order])
