"""Each policy's score and GPU choice on small cases worked out by hand (docs/fgd-method.md §5-§6)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.model import GpuKind, GpuRequest, NodeName, Placement, Slot
from runtimekit.scheduler.plugins.gpushare.fit import fitting_gpus
from runtimekit.scheduler.plugins.gpushare.policies import (
    POLICIES,
    FgdPolicy,
    Learner,
    LearnsAt,
    PodShape,
    PolicyContext,
    TakesWorkload,
    TargetWorkload,
)
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType
from scheduler.helpers import rows, table_of

SHARE_500 = PodShape(cpu_milli=4000, milli=500, count=1)
A = ("a", 8000, [1000, 600])
B = ("b", 64000, [1000, 1000, 1000, 1000])


def scores(policy: str, nodes: list[tuple[str, int, list[int]]], shape: PodShape) -> list[int]:
    table = table_of(nodes)
    ctx = PolicyContext(table, random.Random(1))
    return POLICIES[policy]().score(ctx, shape, rows(table, *(n[0] for n in nodes))).tolist()


def choice(policy: str, node: tuple[str, int, list[int]], shape: PodShape, req: GpuRequest) -> list[int]:
    table = table_of([node])
    ctx = PolicyContext(table, random.Random(1))
    row = table.row(node[0])
    return POLICIES[policy]().choose(ctx, shape, req, row, fitting_gpus(table, row, req))


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # s = 0.5*(8000-4000)/128000 + 0.5*(1600-500)/8000 = 0.084375 -> floor(91.56) ; B: 0.453125 -> 54
        pytest.param("bestfit", [91, 54], id="bestfit"),
        # d = (8000/128000)(4000/128000) + (1600/8000)(500/8000) = 0.014453 -> floor(99.28); B: 0.046875 -> 97
        pytest.param("dotprod", [99, 97], id="dotprod"),
        # A: partial GPU 600 taken -> 100 - (600//10)//10 = 94 ; B: idle node of 4 GPUs -> max(33-4, 4) = 29
        pytest.param("gpupacking", [94, 29], id="gpupacking"),
        # A holds one share pod (same class only): 75 + floor(25*(8000-1600)/8000) = 95; B empty: 25 + 12
        pytest.param("gpuclustering", [95, 37], id="gpuclustering"),
        # binpack: 100*(1 - (G-R)/capacity): A 1-1100/2000 -> 45; B 1-3500/4000 -> 12 ; spread is the mirror
        pytest.param("binpack", [45, 12], id="binpack"),
        pytest.param("spread", [55, 87], id="spread"),
    ],
)
def test_scores_by_hand(policy: str, expected: list[int]) -> None:
    assert scores(policy, [A, B], SHARE_500) == expected


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 128_000), st.lists(st.integers(0, 1000), min_size=1, max_size=8)), min_size=1),
    st.integers(0, 128_000),
    st.integers(1, 1000),
    st.integers(1, 8),
)
def test_bestfit_is_the_papers_formula_in_exact_arithmetic(
    nodes: list[tuple[int, list[int]]], cpu: int, milli: int, count: int
) -> None:
    shape = PodShape(cpu, milli, count)
    named = [(f"n{i}", free, gpus) for i, (free, gpus) in enumerate(nodes)]
    expected = [
        math.floor(100 * (1 - (Fraction(c - cpu, 2 * 128_000) + Fraction(sum(g) - milli * count, 2 * 8000))))
        for _, c, g in named
    ]
    assert scores("bestfit", named, shape) == expected


def test_gpupacking_cases() -> None:
    nodes = [("c", 8000, [1000, 1000]), ("d", 8000, [1000, 300]), ("e", 8000, [1000])]
    # idle 2-GPU node 31, a fully free GPU must be taken on d -> max(50-1, 33), idle 1-GPU node 32
    assert scores("gpupacking", nodes, SHARE_500) == [31, 49, 32]
    assert scores("gpupacking", nodes, PodShape(1000)) == [0, 0, 0]


def test_gpuclustering_prefers_nodes_with_the_same_class() -> None:
    table = table_of([("s", 8000, [1000, 1000]), ("w", 8000, [1000, 1000]), ("m", 8000, [1000, 1000])])
    table.take(Placement(NodeName("s"), 0, 0, (Slot(0, 300, 0),)))
    table.take(Placement(NodeName("w"), 0, 0, (Slot(0, 1000, 16384),)))
    table.take(Placement(NodeName("m"), 0, 0, (Slot(0, 300, 0),)))
    table.take(Placement(NodeName("m"), 0, 0, (Slot(1, 1000, 16384),)))
    ctx = PolicyContext(table, random.Random(1))
    got = POLICIES["gpuclustering"]().score(ctx, SHARE_500, rows(table, "s", "w", "m")).tolist()
    # G: s 1700 -> base 19, w 1000 -> 21, m 700 -> 22; same class only 75, other only 0, mixed 50
    assert got == [75 + 19, 21, 50 + 22]


def test_best_fit_gpu_choice_and_whole_gpus() -> None:
    req = GpuRequest(GpuKind.SHARE, 1, 500, 0)
    assert choice("bestfit", ("n", 8000, [1000, 600, 550, 900]), SHARE_500, req) == [2]
    assert choice("spread", ("n", 8000, [1000, 600, 550, 1000]), SHARE_500, req) == [0]
    two = GpuRequest(GpuKind.WHOLE, 2)
    shape = PodShape(1000, 1000, 2, whole=True)
    for policy in POLICIES:
        assert choice(policy, ("n", 8000, [400, 1000, 1000, 1000]), shape, two) == [1, 2], policy


def test_random_policy_is_seeded() -> None:
    table = table_of([("a", 8000, [1000]), ("b", 8000, [1000]), ("c", 8000, [1000])])
    picks = []
    for seed in (1, 1, 2):
        ctx = PolicyContext(table, random.Random(seed))
        picks.append(POLICIES["random"]().score(ctx, SHARE_500, rows(table, "a", "b", "c")).tolist())
    assert picks[0] == picks[1]
    assert all(sorted(p) == [0, 0, 100] for p in picks)


def workload() -> TargetWorkload:
    return TargetWorkload.from_types([PodType(1000, 500, 1), PodType(1000, 1000, 1)])


def test_fgd_by_hand() -> None:
    # Workload: half 0.5-GPU pods, half 1-GPU pods (both 1 CPU). Node a = [1000, 600]: F = 0.5*0 + 0.5*600 = 300.
    # Placing 500 on GPU0 -> [500, 600]: F = 0.5*0 + 0.5*1100 = 550, score floor(100 sigmoid(-0.25)) = 43;
    # on GPU1 -> [1000, 100]: F = 100, score floor(100 sigmoid(0.2)) = 54.  Node b (4 idle GPUs): 43.
    table = table_of([("a", 8000, [1000, 600]), ("b", 64000, [1000, 1000, 1000, 1000])])
    fgd = FgdPolicy(workload())
    ctx = PolicyContext(table, random.Random(1))
    shape = PodShape(1000, 500, 1)
    assert fgd.score(ctx, shape, rows(table, "a", "b")).tolist() == [54, 43]
    req = GpuRequest(GpuKind.SHARE, 1, 500, 0)
    row = table.row("a")
    assert fgd.choose(ctx, shape, req, row, fitting_gpus(table, row, req)) == [1]
    row_b = table.row("b")
    assert fgd.choose(ctx, shape, req, row_b, fitting_gpus(table, row_b, req)) == [0]


def test_fgd_cache_follows_node_changes() -> None:
    table = table_of([("a", 8000, [1000, 600]), ("b", 64000, [1000, 1000, 1000, 1000])])
    fgd = FgdPolicy(workload())
    ctx = PolicyContext(table, random.Random(1))
    shape = PodShape(1000, 500, 1)
    assert fgd.score(ctx, shape, rows(table, "a")).tolist() == [54]
    table.take(Placement(NodeName("a"), 0, 0, (Slot(1, 500, 0),)))  # a becomes [1000, 100]
    # F before = 0.5*100 + 0.5*100 = 100; on GPU0 -> [500, 100]: 0.5*100 + 0.5*600 = 350 -> sigmoid(-0.25) = 43
    assert fgd.score(ctx, shape, rows(table, "a")).tolist() == [43]


def test_fgd_workload_from_pods_keeps_the_popular_types() -> None:
    types = [PodType(1000, 500, 1)] * 60 + [PodType(2000, 1000, 1)] * 36 + [PodType(3000, 0, 0)] * 4
    wl = TargetWorkload.from_types(types, coverage=0.95)
    assert wl.types == (PodType(1000, 500, 1), PodType(2000, 1000, 1))
    np.testing.assert_allclose(wl.probabilities, [0.625, 0.375])


def test_fgd_counts_cpu_only_types_as_fragment_everywhere() -> None:
    wl = TargetWorkload.from_types([PodType(1000, 0, 0), PodType(1000, 1000, 1)])
    from runtimekit.scheduler.plugins.gpushare.policies import Fragmentation

    frag = Fragmentation(wl)
    # G = 1600: CPU-only type counts all of it, the 1-GPU type the 600 GPU -> 0.5*1600 + 0.5*600
    assert frag.values([("T4", (600, 1000), 1)]) == [pytest.approx(1100.0)]
    # too little CPU for any type: everything is fragment
    assert frag.values([("T4", (600, 1000), 0)]) == [pytest.approx(1600.0)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, 500, 1000, 2000]),
            st.sampled_from([50, 230, 470, 810, 1000]),
            st.sampled_from([0, 1, 1, 2, 4, 8]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.lists(st.integers(0, 1000), min_size=0, max_size=8), min_size=1, max_size=12),
    st.integers(0, 4),
)
def test_fgd_values_one_by_one_equal_the_batch(
    types: list[tuple[int, int, int]], states: list[list[int]], bucket: int
) -> None:
    """A few F values are worked out one by one, many in a numpy batch: both give the same floats
    to the last bit, or FGD's placements would depend on how many values were missing at once."""
    from runtimekit.scheduler.plugins.gpushare.policies import Fragmentation

    wl = TargetWorkload.from_types(PodType(cpu, milli if count else 0, count) for cpu, milli, count in types)
    keys = list(dict.fromkeys(("T4", tuple(sorted(s)), bucket) for s in states))
    batch = Fragmentation(wl)
    batch._compute(keys)
    single = Fragmentation(wl)
    assert [single._compute_one(k) for k in keys] == [batch.memo[k] for k in keys]


def test_the_learning_policies_say_which_pods_they_learn_from() -> None:
    policies = {name: make() for name, make in POLICIES.items()}
    learners = {name: p.learns_at for name, p in policies.items() if isinstance(p, Learner)}
    assert learners == {"fgd": LearnsAt.SCORE, "packfrag": LearnsAt.FILTER}
    assert [name for name, p in policies.items() if isinstance(p, TakesWorkload)] == ["fgd"]


def test_fgd_given_a_workload_keeps_it() -> None:
    given_workload = TargetWorkload.from_types([PodType(1000, 500, 1)])
    fixed = FgdPolicy().with_workload(given_workload)
    assert isinstance(fixed, FgdPolicy)
    fixed.learn(PodType(2000, 1000, 1))
    assert fixed.workload is given_workload


def test_fgd_without_a_workload_scores_every_node_alike_and_chooses_by_best_fit() -> None:
    nodes = [A, B]
    table = table_of(nodes)
    ctx = PolicyContext(table, random.Random(1))
    assert FgdPolicy().score(ctx, SHARE_500, rows(table, "a", "b")).tolist() == [0, 0]
    req = GpuRequest(GpuKind.SHARE, 1, 500, 0)
    assert choice("fgd", A, SHARE_500, req) == choice("bestfit", A, SHARE_500, req) == [1]
