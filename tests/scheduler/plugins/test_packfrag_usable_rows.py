"""packfrag's usable capacity is worked out two ways, plain ints for the few entries between two pods
and numpy for many (a new shape, every node after a relearn): both must give the same integers per
type and so the same values to the last bit, or the policy's decisions would depend on batch sizes."""

from __future__ import annotations

import random

import numpy as np

from runtimekit.model import MILLI
from runtimekit.scheduler.plugins.gpushare.policies import TargetWorkload
from runtimekit.scheduler.plugins.gpushare.policies.packfrag import SMALL_COMPUTE, UsableCapacity
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType

TYPES = [
    PodType(4000, 500, 1),
    PodType(8000, 250, 1),
    PodType(2000, 300, 2),  # a multi-GPU share
    PodType(16000, 1000, 1),
    PodType(32000, 1000, 4),
    PodType(64000, 1000, 8),
    PodType(6000, 0, 0),  # CPU-only
    PodType(3000, 700, 1, "A100"),  # one model only
    PodType(1, 100, 1),
]


def entries(seed: int, n: int) -> tuple[list[tuple[str, tuple[int, ...]]], list[int]]:
    rng = random.Random(seed)
    states = []
    for _ in range(n):
        gpus = rng.choice((1, 2, 4, 8))
        free = sorted(rng.choice((0, 50, 200, 300, 500, 700, 800, MILLI, MILLI)) for _ in range(gpus))
        states.append((rng.choice(("A100", "V100")), tuple(free)))
    cpu = [rng.choice((-500, 0, 999, 4000, 30_000, 70_000, 128_000)) for _ in range(n)]
    return states, cpu


def test_plain_ints_and_numpy_give_the_same_usable_capacity() -> None:
    weights = [5, 3, 2, 4, 1, 1, 6, 2, 1]
    workload = TargetWorkload.from_counts(dict(zip(TYPES, weights, strict=True)), coverage=1.0)
    capacity = UsableCapacity(workload)
    states, cpu = entries(7, 300)
    batch = capacity._usable_rows(states, cpu)
    one_by_one = [capacity._usable_row(model, ms, c) for (model, ms), c in zip(states, cpu, strict=True)]
    assert batch.tolist() == one_by_one
    assert batch[:, [TYPES.index(t) for t in workload.types if t.cpu_only]].sum() == 0
    assert batch.any()


def test_a_small_batch_is_valued_to_the_last_bit_as_a_numpy_one() -> None:
    workload = TargetWorkload.from_counts(dict(zip(TYPES, range(1, 10), strict=True)), coverage=1.0)
    capacity = UsableCapacity(workload)
    for seed in range(20):
        states, cpu = entries(seed, SMALL_COMPUTE)
        small = capacity._compute(states, cpu)  # the plain-int path
        numpy_rows = capacity._usable_rows(states, cpu)
        assert np.array_equal(small, np.asarray(numpy_rows @ capacity.p, np.float64))
