"""The arrival sequence of one replay (docs/fgd-method.md §2.2): the pod list shuffled, tuned up
(resampling with replacement) or down (random removal) to a target share of cluster GPU capacity,
and a random node priority for ties. The same seed gives the same sequence for every policy.
`shifted_arrivals` puts two lists one after the other, to see a policy through a change of mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from runtimekit.model.trace import TraceNode, TracePod


@dataclass(frozen=True)
class Arrivals:
    pods: list[TracePod]  # in arrival order
    node_rank: dict[str, int]  # tie-break order: lower wins
    target_milli: int


def build_arrivals(pods: Sequence[TracePod], nodes: Sequence[TraceNode], seed: int, tune: float) -> Arrivals:
    rng = np.random.default_rng(seed)
    original = sorted(pods, key=lambda p: p.name)
    order = rng.permutation(len(original))
    sequence = [original[i] for i in order]
    capacity = 1000 * sum(n.gpus for n in nodes)
    target = int(tune * capacity)
    total = sum(p.total_gpu_milli for p in sequence)
    if total < target:
        copies = 0
        while True:
            pick = original[int(rng.integers(len(original)))]
            # The artifact tests the per-GPU share but adds the total (so it may overshoot slightly).
            if total + pick.gpu_milli > target:
                break
            copies += 1
            sequence.append(replace(pick, name=f"{pick.name}-r{copies}"))
            total += pick.total_gpu_milli
    else:
        while total > target:
            removed = sequence.pop(int(rng.integers(len(sequence))))
            total -= removed.total_gpu_milli
    by_name = sorted(n.name for n in nodes)
    perm = rng.permutation(len(by_name))
    return Arrivals(sequence, {name: int(perm[i]) for i, name in enumerate(by_name)}, target)


def shifted_arrivals(
    first: Sequence[TracePod], second: Sequence[TracePod], nodes: Sequence[TraceNode], seed: int, tune: float
) -> Arrivals:
    """A workload whose mix changes half-way: `first`'s arrivals tuned to half the target load, then
    `second`'s to the other half (each built as `build_arrivals` builds a list's, the second from
    seed + 1000; its pods renamed `b-NAME`, so names stay unique), with the first's node order."""
    a = build_arrivals(first, nodes, seed, tune / 2)
    b = build_arrivals(second, nodes, seed + 1000, tune / 2)
    renamed = [replace(p, name=f"b-{p.name}") for p in b.pods]
    return Arrivals([*a.pods, *renamed], a.node_rank, a.target_milli + b.target_milli)
