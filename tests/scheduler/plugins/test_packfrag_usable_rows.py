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


def test_a_few_scores_in_plain_floats_are_numpys_to_the_point() -> None:
    """`_score_list` (math.exp, numpy only near an integer) against `_scores` (numpy), on losses
    that land on an integer score (0 gives 50 exactly) or a hair beside one, and on random ones."""
    from runtimekit.scheduler.plugins.gpushare.policies.packfrag import PackFragPolicy

    rng = random.Random(3)
    edges = [0.0, 5e-13, -5e-13, 1e-300, -1e-300, 1e6, -1e6, 800_000.0]
    for score in range(1, 100):  # the loss whose score is exactly `score`, and its neighbours
        loss = 1000.0 * float(np.log(100.0 / score - 1.0))
        edges.extend([loss, float(np.nextafter(loss, np.inf)), float(np.nextafter(loss, -np.inf))])
    randoms = [rng.uniform(-20_000.0, 20_000.0) for _ in range(3000)]
    for losses in (edges, randoms):
        with np.errstate(over="ignore"):  # exp(1000): inf, the score 0
            expected = PackFragPolicy._scores(np.array(losses)).tolist()
            got = [x for i in range(0, len(losses), 5) for x in PackFragPolicy._score_list(losses[i : i + 5])]
        assert got == expected
    assert PackFragPolicy._score_list([0.0, 1e6]) == [50, 0]


def test_a_relearn_keeps_the_facts_and_multiples_and_works_out_the_same() -> None:
    """What `keep_from` carries to a new workload's capacity (GPU facts, CPU multiples) is what the new
    capacity would have worked out itself: the same buckets, rows and values."""
    first = TargetWorkload.from_counts(dict(zip(TYPES, range(1, 10), strict=True)), coverage=1.0)
    second = TargetWorkload.from_counts(dict(zip(TYPES, [9, 1, 1, 7, 2, 2, 3, 1, 5], strict=True)), coverage=1.0)
    earlier = UsableCapacity(first)
    states, cpu = entries(11, 200)
    earlier._usable_rows(states, cpu)
    earlier.bucket(np.array(cpu, np.int64), np.full(len(cpu), 8, np.int64))
    kept, fresh = UsableCapacity(second), UsableCapacity(second)
    kept.keep_from(earlier)
    assert kept._facts is earlier._facts
    assert kept._multiple_list is earlier._multiple_list
    gpus = np.array([len(ms) for _, ms in states], np.int64)
    assert np.array_equal(kept.bucket(np.array(cpu), gpus), fresh.bucket(np.array(cpu), gpus))
    assert np.array_equal(kept._usable_rows(states, cpu), fresh._usable_rows(states, cpu))
    assert np.array_equal(kept._compute(states, cpu), fresh._compute(states, cpu))
    other = UsableCapacity(TargetWorkload.from_counts({PodType(4000, 450, 1): 1, PodType(500, 100, 1): 1}, 1.0))
    other.keep_from(earlier)  # other share sizes and CPU: nothing carried
    assert other._facts is not earlier._facts
    assert other._multiple_list is not earlier._multiple_list


def test_a_nodes_cpu_bucket_in_plain_ints_is_numpys() -> None:
    """`bucket_of` (one node, between pods) and `bucket` (many) put every free CPU and GPU count,
    negative CPU and more GPUs than MAX_GPUS included, in the same bucket."""
    workload = TargetWorkload.from_counts(dict(zip(TYPES, range(1, 10), strict=True)), coverage=1.0)
    rng = random.Random(5)
    cpu = [rng.choice((-5000, -1, 0, 1, 999, 1000, 2000, 64_000, 128_000)) + rng.randint(-2, 2) for _ in range(3000)]
    gpus = [rng.choice((0, 1, 2, 4, 8, 16, 70)) for _ in range(3000)]
    one_by_one = UsableCapacity(workload)
    plain = [one_by_one.bucket_of(c, g) for c, g in zip(cpu, gpus, strict=True)]
    assert UsableCapacity(workload).bucket(np.array(cpu), np.array(gpus)).tolist() == plain
    assert len(set(plain)) > 50
