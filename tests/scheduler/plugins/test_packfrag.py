"""The packfrag policy: its usable-capacity loss worked out by hand, its online workload, how the
gpushare plugin feeds it, and (slow) that it allocates more than FGD on a trace list."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from runtimekit.model import (
    MILLI,
    GpuKind,
    GpuRequest,
    NodeCapacity,
    NodeInventory,
    NodeName,
    NodeTable,
    Placement,
    PodKey,
    Slot,
)
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo
from runtimekit.scheduler.plugins.gpushare.fit import fitting_gpus
from runtimekit.scheduler.plugins.gpushare.plugin import GpuSharePlugin
from runtimekit.scheduler.plugins.gpushare.policies import PackFragPolicy, PodShape, PolicyContext, TargetWorkload
from runtimekit.scheduler.plugins.gpushare.policies.nodestates import placements
from runtimekit.scheduler.plugins.gpushare.policies.packfrag import OnlineWorkload
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType
from runtimekit.sim.runner import SimulationSpec, run_simulation
from scheduler.helpers import rows, table_of, whole

HALF = PodType(1000, 500, 1)
ONE = PodType(1000, 1000, 1)
SHARE_500 = PodShape(cpu_milli=1000, milli=500, count=1)


def halves() -> TargetWorkload:
    return TargetWorkload.from_types([HALF, ONE])


def test_loss_by_hand() -> None:
    # Whole-GPU types at full weight (whole_weight=1), so the usable capacities add up plainly.
    # Workload: half 0.5-GPU pods, half 1-GPU pods, 1 CPU each. U = 0.5 U_half + 0.5 U_one.
    # a = [1000, 600], 8 CPUs: U_half = 1600 (both GPUs fit 500), U_one = 1000 -> U = 1300.
    #   500 on the 600 GPU -> [1000, 100]: U = 0.5*1000 + 0.5*1000 = 1000, loss 300 -> floor(100 sigmoid(-0.3)) = 42
    #   500 on the idle GPU -> [500, 600]: U = 0.5*1100 + 0 = 550, loss 750 (the better option is kept)
    # b = 4 idle GPUs: U = 4000 -> [500, 1000, 1000, 1000]: 0.5*3500 + 0.5*3000 = 3250, loss 750 -> 32
    table = table_of([("a", 8000, [1000, 600]), ("b", 64000, [1000, 1000, 1000, 1000])])
    policy = PackFragPolicy(halves(), whole_weight=1.0)
    ctx = PolicyContext(table, random.Random(1))
    assert policy.score(ctx, SHARE_500, rows(table, "a", "b")).tolist() == [42, 32]
    req = GpuRequest(GpuKind.SHARE, 1, 500, 0)
    row = table.row("a")
    assert policy.choose(ctx, SHARE_500, req, row, fitting_gpus(table, row, req)) == [1]


def test_free_cpu_limits_the_usable_capacity() -> None:
    # c = 2 idle GPUs but 1 free CPU: one pod of either type fits, so U = 0.5*1000 + 0.5*1000 = 1000, and
    # after the pod no CPU is left: U = 0, loss 1000 -> 26. d = 2 idle GPUs, 64 CPUs: U 2000 -> 1250, loss 750 -> 32.
    table = table_of([("c", 1000, [1000, 1000]), ("d", 64000, [1000, 1000])])
    ctx = PolicyContext(table, random.Random(1))
    assert PackFragPolicy(halves(), whole_weight=1.0).score(ctx, SHARE_500, rows(table, "c", "d")).tolist() == [26, 32]


def test_whole_gpu_types_count_a_quarter_per_gpu_by_default() -> None:
    # The same nodes as test_loss_by_hand, U = 0.5 U_half + 0.25 * 0.5 U_one.
    # a = [1000, 600]: U = 800 + 125 = 925 -> [1000, 100]: 500 + 125 = 625, loss 300 -> 42
    #   (the idle GPU instead -> [500, 600]: 550 + 0, loss 375)
    # b = 4 idle GPUs: U = 2000 + 500 = 2500 -> [500, 1000, 1000, 1000]: 1750 + 375 = 2125, loss 375 -> 40
    # Taking an idle GPU costs less than at full weight (32), so b comes closer to a.
    table = table_of([("a", 8000, [1000, 600]), ("b", 64000, [1000, 1000, 1000, 1000])])
    ctx = PolicyContext(table, random.Random(1))
    assert PackFragPolicy(halves()).score(ctx, SHARE_500, rows(table, "a", "b")).tolist() == [42, 40]


def test_a_type_of_k_whole_gpus_counts_per_gpu() -> None:
    # Half 0.5-GPU pods, half 8-GPU pods; node e = 8 idle GPUs, 64 CPUs. A 0.5-GPU pod there:
    # U_half 8000 -> 7500 (loss 0.5 * 500 = 250), U_eight 8000 -> 0, counted w / 8 per GPU:
    #   whole_weight 1:    0.5 * 8000 / 8 = 500,  loss 750  -> 32
    #   whole_weight 0.25: 0.5 * 2000 / 8 = 125,  loss 375  -> 40
    workload = TargetWorkload.from_types([HALF, PodType(1000, 1000, 8)])
    table = table_of([("e", 64000, [1000] * 8)])
    ctx = PolicyContext(table, random.Random(1))
    assert PackFragPolicy(workload, whole_weight=1.0).score(ctx, SHARE_500, rows(table, "e")).tolist() == [32]
    assert PackFragPolicy(workload).score(ctx, SHARE_500, rows(table, "e")).tolist() == [40]
    with pytest.raises(ValueError, match="whole_weight"):
        PackFragPolicy(workload, whole_weight=-1)


def test_a_whole_gpu_type_few_nodes_can_host_keeps_more_weight() -> None:
    # Half 0.5-GPU pods (1 CPU), half 8-GPU pods asking 120 CPUs, which only g3 (128 CPUs) can host.
    # A 0.5-GPU pod asking 10 CPUs: on g2 (96 CPUs) it costs U_half 500 * 0.5 = 250 -> 43; on g3 it
    # also leaves 118 CPUs, too few for the 8-GPU type, whose U drops 8000 -> 0:
    #   weight 0.25/8 (hosts not counted):           + 0.5 * 8000 * 0.03125 = 125, loss 375 -> 40
    #   x (2 nodes with 8 GPUs / 1 with the CPU) = 0.0625: + 250,               loss 500 -> 37
    workload = TargetWorkload.from_types([HALF, PodType(120_000, 1000, 8)])
    table = NodeTable()
    for name, cpus in (("g3", 128_000), ("g2", 96_000)):
        table.add_node(NodeInventory.simulated(name, "G3", 8, 16384), NodeCapacity(cpus, 10**6 << 20, 110))
    ctx = PolicyContext(table, random.Random(1))
    shape = PodShape(cpu_milli=10_000, milli=500, count=1)
    from runtimekit.scheduler.plugins.gpushare.policies.packfrag import UsableCapacity

    plain = UsableCapacity(workload)
    rarity = [2 if t.count == 8 else 1 for t in workload.types]
    np.testing.assert_allclose(UsableCapacity(workload, table=table).p, plain.p * rarity)
    assert PackFragPolicy(workload).score(ctx, shape, rows(table, "g3", "g2")).tolist() == [37, 43]


def test_scores_follow_node_changes() -> None:
    table = table_of([("a", 8000, [1000, 600])])
    policy = PackFragPolicy(halves(), whole_weight=1.0)
    ctx = PolicyContext(table, random.Random(1))
    assert policy.score(ctx, SHARE_500, rows(table, "a")).tolist() == [42]
    from runtimekit.model import Placement, Slot

    table.take(Placement(NodeName("a"), 0, 0, (Slot(1, 500, 0),)))  # a becomes [1000, 100]
    # U = 0.5*1000 + 0.5*1000 = 1000 -> [500, 100]: 0.5*500 = 250, loss 750 -> 32
    assert policy.score(ctx, SHARE_500, rows(table, "a")).tolist() == [32]


def test_placements_are_distinct_and_keep_the_rest() -> None:
    assert placements(SHARE_500, (400, 600, 600, 1000)) == [(600, (100, 400, 600, 1000)), (1000, (400, 500, 600, 600))]
    assert placements(PodShape(1000, 1000, 2, whole=True), (300, 1000, 1000)) == [(1000, (0, 0, 300))]
    assert placements(PodShape(1000, 600, 2), (500, 700, 900, 1000)) == [(700, (100, 300, 500, 1000))]
    assert placements(PodShape(1000), (300,)) == [(-1, (300,))]


def test_workload_is_learned_from_the_last_window_of_pods() -> None:
    policy = PackFragPolicy(window=4, relearn_every=1)
    assert policy.workload is None
    for _ in range(4):
        policy.learn(HALF)
    assert policy.workload is not None
    assert policy.workload.types == (HALF,)
    for _ in range(3):
        policy.learn(ONE)
    assert policy.workload.types == (ONE, HALF)
    np.testing.assert_allclose(policy.workload.probabilities, [0.75, 0.25])
    policy.learn(ONE)  # the last HALF leaves the window
    assert policy.workload.types == (ONE,)
    assert policy.pods_seen == 8


def _feed(learner: OnlineWorkload, mix: Sequence[tuple[PodType, float]], pods: int, rng: random.Random) -> list[int]:
    """Count `pods` pods drawn from `mix`; the pod counts at which a new workload came back."""
    types, weights = zip(*mix, strict=True)
    used = []
    for pod_type in rng.choices(types, weights, k=pods):
        if learner.add(pod_type) is not None:
            used.append(learner.seen)
    return used


def test_a_settled_workload_is_kept_until_it_moves() -> None:
    rng = random.Random(7)
    learner = OnlineWorkload(window=4096, relearn_every=256, coverage=1.0)
    quarter = PodType(2000, 250, 1)
    used = _feed(learner, [(HALF, 0.5), (ONE, 0.3), (quarter, 0.2)], 8192, rng)
    # the cold start (1, 2, 4, ... 256 pods) is always used; past it the mix stands still, and the
    # 31 later relearns move it by sampling noise: only a few are used
    assert used[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert len(used) - 9 <= 4
    kept = learner.current
    assert kept is not None
    got = dict(zip(kept.types, kept.probabilities.tolist(), strict=True))
    assert got == pytest.approx({HALF: 0.5, ONE: 0.3, quarter: 0.2}, abs=0.03)
    # the mix shifts: the first relearn after it is used, and the workload follows the new mix
    shifted = _feed(learner, [(ONE, 0.8), (quarter, 0.2)], 4096, rng)
    assert shifted[0] == 8192 + 256
    assert len(shifted) >= 4
    current = learner.current
    assert current is not None
    got = dict(zip(current.types, current.probabilities.tolist(), strict=True))
    assert got == pytest.approx({ONE: 0.8, quarter: 0.2}, abs=0.03)


def test_a_new_whole_gpu_type_is_used_at_once_however_rare() -> None:
    rng = random.Random(7)
    learner = OnlineWorkload(window=4096, relearn_every=256, coverage=1.0)
    _feed(learner, [(HALF, 0.6), (ONE, 0.4)], 4096, rng)
    eight = PodType(120_000, MILLI, 8)
    learner.add(eight)  # one pod in 4,096: it moves the proportions by 0.0002
    assert _feed(learner, [(HALF, 0.6), (ONE, 0.4)], 255, rng) == [4096 + 256]
    assert learner.current is not None
    assert eight in learner.current.types
    # without the drift allowance every relearn is used
    eager = OnlineWorkload(window=4096, relearn_every=256, coverage=1.0, drift=0.0)
    assert len(_feed(eager, [(HALF, 0.6), (ONE, 0.4)], 4096, rng)) == 9 + 15  # 1, 2, 4, ... 256, then every 256


def test_the_policy_keeps_its_caches_while_the_workload_stands() -> None:
    table = table_of([("a", 64000, [1000, 1000, 600]), ("b", 64000, [1000, 400])])
    policy = PackFragPolicy(window=2048, relearn_every=256)
    ctx = PolicyContext(table, random.Random(1))
    rng = random.Random(3)
    capacities = []
    for pod_type in rng.choices([HALF, ONE], [0.5, 0.5], k=4096):
        policy.learn(pod_type)
        policy.score(ctx, SHARE_500, rows(table, "a", "b"))
        capacities.append(policy._usable)
    # one UsableCapacity (and its memo) per workload used: the cold start's 9 and a few after it
    assert 9 <= len({id(c) for c in capacities}) <= 12


def test_a_pod_scored_before_any_was_learned_is_its_own_workload() -> None:
    table = table_of([("a", 8000, [1000, 600])])
    policy = PackFragPolicy()
    scores = policy.score(PolicyContext(table, random.Random(1)), SHARE_500, rows(table, "a"))
    assert policy.workload is not None
    assert policy.workload.types == (HALF,)
    # U_half [1000, 600] = 1600; [1000, 100] keeps 1000, [500, 600] keeps 1100:
    # loss 500 -> floor(100 sigmoid(-0.5)) = 37
    assert scores.tolist() == [37]


def test_the_plugin_teaches_each_pod_once_however_often_it_is_retried() -> None:
    entries = [
        (
            NodeInventory.simulated("n1", "T4", 1, 16384),
            NodeCapacity(64000, 256 << 30, 110),
            NodeMeta(NodeName("n1"), {}, (), False, "T4"),
        )
    ]
    cache = StaticCache(entries)
    for i in range(3):
        job = JobInfo(JobKey(f"j{i}"), "default", f"j{i}", created=float(i))
        job.add(TaskInfo(PodKey(f"j{i}-0"), "default", f"j{i}-0", job.key, whole(1), created=float(i)))
        cache.add_job(job)
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.policy: packfrag}\n'
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    for _ in range(3):  # one pod binds, two are retried every session
        framework.run_once(cache)
    plugin = framework.plugin("gpushare")
    assert isinstance(plugin, GpuSharePlugin)
    policy = plugin.policies["packfrag"]
    assert isinstance(policy, PackFragPolicy)
    assert policy.pods_seen == 3
    assert policy.workload is not None
    assert policy.workload.types == (PodType(1000, 1000, 1),)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpuspec10", "multigpu20"])
def test_packfrag_allocates_more_than_fgd(openb_dir: Path, name: str) -> None:
    """gpuspec10 (10 % of pods restricted to GPU models) and multigpu20 (more multi-GPU pods, where
    counting whole-GPU types at full weight had left packfrag +0.14 ahead): packfrag is ahead by
    +0.4 to +1.4 points at columns 100 and 130 on every seed 42-51, and behind at no column from 50
    on (before the rare hosts were kept it failed 8-GPU pods from column 59 on multigpu20, seed 42;
    docs/results/better-than-fgd.md)."""
    pods = openb_dir / f"openb_pod_list_{name}.csv"
    if not pods.exists():
        pytest.skip(f"{pods.name} is in the shared traces only (not bundled), and they are not here")
    spec = SimulationSpec(
        str(openb_dir / "openb_node_list_gpu_node.csv"),
        str(pods),
        ("fgd", "packfrag"),
        (42, 43),
        1.3,
    )
    report = run_simulation(spec, jobs=2)
    for seed in (42, 43):
        fgd, packfrag = (
            next(r for r in report.results if r.policy == p and r.seed == seed) for p in ("fgd", "packfrag")
        )
        for column in ("100", "130"):
            assert packfrag.columns[column] is not None
            assert fgd.columns[column] is not None
            assert packfrag.columns[column] > fgd.columns[column] + 0.3, (seed, column)  # type: ignore[operator]
        for column in map(str, range(50, 131)):
            assert packfrag.columns[column] >= fgd.columns[column] - 0.05, (seed, column)  # type: ignore[operator]


def test_node_states_start_afresh_past_the_limit_and_scores_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running scheduler (also one given its workload, which never relearns) meets endless
    node states: past MEMO_LIMIT the policy forgets them and scores as a fresh policy would."""
    from runtimekit.model import Placement, Slot
    from runtimekit.scheduler.plugins.gpushare.policies import packfrag

    monkeypatch.setattr(packfrag, "MEMO_LIMIT", 3)
    table = table_of([("a", 64000, [1000, 1000, 1000, 1000]), ("b", 64000, [1000, 600])])
    policy = PackFragPolicy(halves())
    ctx = PolicyContext(table, random.Random(1))
    for gpu in range(4):
        table.take(Placement(NodeName("a"), 1000, 0, (Slot(gpu, 100, 0),)))
        fresh = PackFragPolicy(halves()).score(ctx, SHARE_500, rows(table, "a", "b"))
        assert policy.score(ctx, SHARE_500, rows(table, "a", "b")).tolist() == fresh.tolist()
        assert len(policy._nodes.states) <= 3 + 8  # at most the limit plus one pod's worth of new states


def rich_and_plain(rich_free: Sequence[int] = (1000,) * 8, rich_cpu: int = 128_000) -> NodeTable:
    """Five 8-GPU nodes with 96 cores and one with 128 (openb's G2 and G3, one to five)."""
    table = NodeTable()
    for i in range(5):
        table.add_node(NodeInventory.simulated(f"g2-{i}", "G2", 8, 16384), NodeCapacity(96_000, 10**6 << 20, 110))
    table.add_node(NodeInventory.simulated("g3", "G3", 8, 16384), NodeCapacity(128_000, 10**6 << 20, 110))
    slots = tuple(Slot(i, MILLI - free, 0) for i, free in enumerate(rich_free) if free < MILLI)
    table.take(Placement(NodeName("g3"), 128_000 - rich_cpu, 0, slots))
    return table


@pytest.mark.parametrize(
    ("capacities", "expected"),
    [
        pytest.param([(8, 96_000)] * 5 + [(8, 128_000)], [(8, 96_001)], id="one-rich-of-six"),
        pytest.param([(8, 96_000), (8, 128_000)], [], id="one-of-two-is-not-rare"),
        pytest.param([(4, 96_000)] * 10 + [(8, 128_000), (4, 128_000)], [], id="rich-nodes-of-two-sizes"),
        pytest.param([(8, 96_000)] * 6, [], id="all-alike"),
    ],
)
def test_nodes_few_others_match_are_rare_hosts(
    capacities: list[tuple[int, int]], expected: list[tuple[int, int]]
) -> None:
    from runtimekit.scheduler.plugins.gpushare.policies.rarehosts import rare_nodes as _rare_nodes

    table = NodeTable()
    for i, (gpus, cpus) in enumerate(capacities):
        table.add_node(NodeInventory.simulated(f"n{i}", "G2", gpus, 16384), NodeCapacity(cpus, 10**6 << 20, 110))
    assert _rare_nodes(table) == expected


@pytest.mark.parametrize(
    ("shape", "rich_free", "rich_cpu", "penalised"),
    [
        pytest.param(SHARE_500, (1000,) * 8, 128_000, True, id="share-pod-on-an-intact-rich-node"),
        pytest.param(SHARE_500, (500,) + (1000,) * 7, 128_000, False, id="rich-node-already-in-use"),
        pytest.param(PodShape(4_000), (1000,) * 8, 128_000, False, id="cpu-only-pod-leaving-enough-cpu"),
        pytest.param(PodShape(40_000), (1000,) * 8, 128_000, True, id="cpu-only-pod-taking-the-extra-cpu"),
        pytest.param(PodShape(1000, 1000, 8, True), (1000,) * 8, 100_000, True, id="eight-gpus-on-the-rich-node"),
    ],
)
def test_a_placement_that_spoils_a_rare_host_goes_last(
    shape: PodShape, rich_free: tuple[int, ...], rich_cpu: int, penalised: bool
) -> None:
    """Before any pod needing it arrives, the one node with more CPU than any other 8-GPU node is
    kept whole: a pod that would leave it without 8 free GPUs or more than 96 free cores loses 100
    points, so it goes there only when nothing else can take it."""
    table = rich_and_plain(rich_free, rich_cpu)
    ctx = PolicyContext(table, random.Random(1))
    every = np.arange(table.rows)
    scores = PackFragPolicy(halves()).score(ctx, shape, every)
    rich = table.row("g3")
    assert bool(scores[rich] < 0) == penalised
    assert (scores[np.arange(table.rows) != rich] >= 0).all()
    some = rows(table, "g3", "g2-1")  # a subset of the rows: the same by row
    assert PackFragPolicy(halves()).score(ctx, shape, some).tolist() == scores[some].tolist()


def test_a_rare_type_once_seen_sets_what_its_hosts_keep() -> None:
    """Once 8-GPU pods asking 120 cores are in the workload, the rich node keeps 120 cores (not just
    more than the other nodes' 96) and the memory the least of them asked; such a pod itself is not
    held back."""
    workload = TargetWorkload.from_types([HALF, PodType(120_000, 1000, 8)] + [HALF] * 20, coverage=1.0)
    table = rich_and_plain()
    ctx = PolicyContext(table, random.Random(1))
    policy = PackFragPolicy(workload)
    every = np.arange(table.rows)
    rich = table.row("g3")
    eight = PodShape(120_000, 1000, 8, True, memory_bytes=700_000 << 20)
    assert policy.score(ctx, eight, every)[rich] >= 0  # the type itself, and its memory learnt
    assert policy.score(ctx, PodShape(10_000), every)[rich] < 0  # 118 cores left: too few now
    assert policy.score(ctx, PodShape(1_000, memory_bytes=200_000 << 20), every)[rich] >= 0
    assert policy.score(ctx, PodShape(1_000, memory_bytes=400_000 << 20), every)[rich] < 0  # 600 GiB left


def test_once_the_rare_type_is_known_only_a_reserve_of_hosts_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the rare type in the workload the hosts kept are RESERVE times the pods of it expected
    while the free GPUs last, plus two: with the expectation set to nothing, two. A third host may
    be spoiled; once only two are left, they are kept."""
    from runtimekit.scheduler.plugins.gpushare.policies import rarehosts

    monkeypatch.setattr(rarehosts, "RESERVE", 0.0)
    workload = TargetWorkload.from_types([HALF, PodType(120_000, 1000, 8)], coverage=1.0)
    table = NodeTable()
    for i in range(12):
        table.add_node(NodeInventory.simulated(f"g2-{i}", "G2", 8, 16384), NodeCapacity(96_000, 10**6 << 20, 110))
    for i in range(3):
        table.add_node(NodeInventory.simulated(f"g3-{i}", "G3", 8, 16384), NodeCapacity(128_000, 10**6 << 20, 110))
    ctx = PolicyContext(table, random.Random(1))
    policy = PackFragPolicy(workload)
    every = np.arange(table.rows)
    rich = rows(table, "g3-0", "g3-1", "g3-2")
    assert (policy.score(ctx, SHARE_500, every)[rich] >= 0).all()  # three hosts, two to keep
    table.take(Placement(NodeName("g3-0"), 1000, 0, (Slot(0, 500, 0),)))
    scores = policy.score(ctx, SHARE_500, every)
    assert (scores[rich[1:]] < 0).all()
    assert scores[rich[0]] >= 0  # no longer a host
