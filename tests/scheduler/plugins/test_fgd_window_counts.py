"""FGD and packfrag learn their target workload from counts kept as the window of recent pods moves
(`policies/fgd.py` `learn`, `policies/packfrag.py`): the workload is the one counted afresh from the
window's pods (`TargetWorkload.from_types`), so the scores and placements do not change."""

from __future__ import annotations

import random

import numpy as np

from runtimekit.scheduler.plugins.gpushare.policies.fgd import FgdPolicy
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload


def _types(n: int, seed: int) -> list[PodType]:
    rng = random.Random(seed)
    shapes = [PodType(1000 * rng.randint(1, 8), rng.choice([100, 250, 500, 1000]), 1) for _ in range(40)]
    shapes.append(PodType(4000, 0, 0))
    # a drift halfway: the second half draws from the last shapes mostly, so old types leave the window
    return [rng.choice(shapes if i < n // 2 else shapes[-8:]) for i in range(n)]


def _same(a: TargetWorkload, b: TargetWorkload) -> bool:
    return a.types == b.types and np.array_equal(a.probabilities, b.probabilities) and a.coverage == b.coverage


def test_from_counts_is_from_types_and_skips_types_counted_zero() -> None:
    pods = _types(500, 1)
    counts = {t: pods.count(t) for t in set(pods)}
    counts[PodType(9000, 700, 1)] = 0
    assert _same(TargetWorkload.from_counts(counts), TargetWorkload.from_types(pods))
    assert _same(TargetWorkload.from_counts(counts, 0.5), TargetWorkload.from_types(pods, 0.5))


def test_fgd_learns_the_workload_of_its_last_window_of_pods() -> None:
    window, every = 64, 16
    policy = FgdPolicy(learn_every=every, window=window)
    pods = _types(600, 2)
    rebuilt = 0
    for i, pod_type in enumerate(pods, start=1):
        before = policy.workload
        policy.learn(pod_type)
        if policy.workload is not before:  # rebuilt now: from exactly the last `window` pods
            assert policy.workload is not None
            assert _same(policy.workload, TargetWorkload.from_types(pods[max(0, i - window) : i]))
            rebuilt += 1
    assert rebuilt >= 2  # the first pods, then the drift
