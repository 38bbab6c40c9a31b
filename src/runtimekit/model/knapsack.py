"""Filling one GPU with shares: the unbounded knapsack over share sizes, capacity 1000 milli, solved
exactly by dynamic programming in steps of the sizes' common divisor (`grain`). Used by the offline
bound's pattern pricing (sim/bound_model.py) and by packfrag's share prices
(scheduler/plugins/gpushare/policies/prices.py)."""

from __future__ import annotations

from collections.abc import Sequence

from runtimekit.model.placement import MILLI


def fill_table(profit: Sequence[float], sizes: Sequence[int], grain: int) -> tuple[list[float], list[int]]:
    """(best, take): best[w] is the most profit of shares fitting in w x `grain` milli, take[w] the
    index of the size its fill ends with (-1: it leaves the last step empty)."""
    cap = MILLI // grain
    best = [0.0] * (cap + 1)
    take = [-1] * (cap + 1)
    steps = [s // grain for s in sizes]
    for w in range(1, cap + 1):
        best[w], take[w] = best[w - 1], -1
        for j, s in enumerate(steps):
            if s <= w and profit[j] > 0 and best[w - s] + profit[j] > best[w] + 1e-12:
                best[w], take[w] = best[w - s] + profit[j], j
    return best, take


def best_pattern(profit: Sequence[float], sizes: Sequence[int], grain: int) -> tuple[float, tuple[int, ...]]:
    """The most profitable way to fill one GPU: (profit, slots per size)."""
    best, take = fill_table(profit, sizes, grain)
    steps = [s // grain for s in sizes]
    slots = [0] * len(sizes)
    w = len(best) - 1
    while w > 0:
        j = take[w]
        if j < 0:
            w -= 1
        else:
            slots[j] += 1
            w -= steps[j]
    return best[-1], tuple(slots)
