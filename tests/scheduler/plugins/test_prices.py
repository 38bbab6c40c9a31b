"""Share prices from the shares-only pattern LP: worked out by hand on a two-size workload, never
negative, and how packfrag uses them: a share goes where the workload can fill the rest of the
GPU, and prices are worked out again only when the learned demand has moved."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.scheduler.plugins.gpushare.policies import PackFragPolicy, PodShape, PolicyContext, TargetWorkload
from runtimekit.scheduler.plugins.gpushare.policies import prices as prices_module
from runtimekit.scheduler.plugins.gpushare.policies.prices import PRICE_WEIGHT, SharePrices, share_prices
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType
from scheduler.helpers import rows, table_of


def test_two_sizes_by_hand() -> None:
    """As many 500s as 810s, GPUs for all their milli: the 500s pair up (1000 milli a GPU) and every
    GPU left takes an 810, so the 810 sets the GPU's price (810) and a 500 is worth half of it. A 500
    on a GPU with 900 free spoils the room of an 810 (405 wasted); on a fresh or a half-used GPU,
    or an 810 anywhere it fits, nothing is wasted."""
    prices = share_prices({500: 1.0, 810: 1.0})
    assert prices is not None
    assert prices.price == pytest.approx({500: 405.0, 810: 810.0})
    assert prices.waste(500, 900) == pytest.approx(405.0)
    assert prices.waste(500, 1000) == prices.waste(500, 500) == 0.0
    assert prices.waste(810, 1000) == prices.waste(810, 900) == 0.0
    assert prices.waste(810, 500) == 0.0  # does not fit: no placement to price
    assert prices.waste(300, 1000) == 0.0  # a size the workload does not have


def test_a_gap_only_rare_pods_fill_is_waste() -> None:
    """470s, 320s and 650s: a 320 beside a 470 leaves 210 that nothing of the workload fills."""
    prices = share_prices({470: 2.0, 320: 1.0, 650: 1.0})
    assert prices is not None
    assert prices.waste(320, 530) > 0.0
    assert prices.waste(320, 1000) == prices.waste(320, 350) == prices.waste(470, 530) == 0.0


def test_one_size_has_no_prices() -> None:
    assert share_prices({500: 1.0}) is None
    assert share_prices({500: 1.0, 1000: 3.0}) is None  # whole GPUs are no share


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.sampled_from([50, 110, 230, 320, 470, 550, 650, 810]), st.integers(1, 50), min_size=2))
def test_waste_is_never_negative(demand: dict[int, int]) -> None:
    prices = share_prices({m: float(n) for m, n in demand.items()})
    assert isinstance(prices, SharePrices)
    for milli in demand:
        assert min(prices.waste_table(milli)) >= 0.0


def mix() -> TargetWorkload:
    counts = [(810, 11), (470, 8), (320, 3), (650, 3), (230, 1), (160, 1), (1000, 40)]
    return TargetWorkload.from_types([PodType(1000, m, 1) for m, n in counts for _ in range(n)], 1.0)


def test_a_share_goes_where_the_workload_fills_the_rest() -> None:
    """A 470 on a GPU with 680 free leaves 210, which only the rare 160s and 230s can use: without
    prices packfrag prefers that (it keeps the fresh GPU for others), with them the fresh GPU wins."""
    shape = PodShape(1000, 470, 1)
    scores = {}
    for weight in (0.0, PRICE_WEIGHT):
        table = table_of([("used", 8000, [680, 0]), ("fresh", 8000, [1000, 0])])
        policy = PackFragPolicy(mix(), price_weight=weight)
        scores[weight] = policy.score(PolicyContext(table, random.Random(1)), shape, rows(table, "used", "fresh"))
    assert scores[0.0][0] > scores[0.0][1]
    assert scores[PRICE_WEIGHT][0] < scores[PRICE_WEIGHT][1]


def test_prices_are_worked_out_again_only_when_the_demand_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[int, float]] = []

    def counted(demand: dict[int, float], start: Sequence[Mapping[int, int]] = ()) -> SharePrices | None:
        calls.append(demand)
        return share_prices(demand, start)

    monkeypatch.setattr(prices_module, "share_prices", counted)
    policy = PackFragPolicy(window=512, relearn_every=256)
    table = table_of([("n", 64000, [1000, 1000])])
    ctx = PolicyContext(table, random.Random(1))

    def learn(sizes: list[int], pods: int) -> None:
        for i in range(pods):
            policy.learn(PodType(1000, sizes[i % len(sizes)], 1))
            policy.score(ctx, PodShape(1000, 470, 1), rows(table, "n"))  # a relearn takes effect here

    learn([470, 320], prices_module.PRICE_AFTER - 1)
    assert calls == []  # too few pods yet
    learn([470, 320], 1024)
    assert len(calls) == 1
    assert calls[0] == pytest.approx({470: 0.5, 320: 0.5}, abs=0.01)
    learn([470, 320, 650], 2048)  # a third of the demand moves to 650s
    assert len(calls) > 1
    assert calls[-1] == pytest.approx({470: 1 / 3, 320: 1 / 3, 650: 1 / 3}, abs=0.01)
    settled = len(calls)
    learn([470, 320, 650], 2048)  # relearns, but the demand stays: no new prices
    assert len(calls) == settled


_BUILD = """
import sys
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.inprocess import FrameworkConfig, build_framework
before = "scipy.optimize" in sys.modules
conf = parse_conf('actions: "allocate"\\ntiers:\\n- plugins:\\n  - name: gpushare\\n'
                  '    arguments: {gpushare.policy: %s}\\n')
build_framework(FrameworkConfig(conf, seed=1))
print(before, "scipy.optimize" in sys.modules)
"""


@pytest.mark.parametrize(("policy", "loaded"), [("packfrag", True), ("fgd", False)])
def test_a_scheduler_configured_with_packfrag_loads_the_lp_solver_when_built(policy: str, loaded: bool) -> None:
    """The LP solver's import (about 0.3 s of CPU) happens when the framework is built, not in the
    decision that first solves the prices; a scheduler configured with another policy does not pay it
    (a fresh interpreter: this one has scipy already)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # this run's src
    done = subprocess.run([sys.executable, "-c", _BUILD % policy], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.split() == ["False", str(loaded)]
