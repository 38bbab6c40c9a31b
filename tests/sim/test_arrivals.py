from __future__ import annotations

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import build_arrivals, shifted_arrivals

NODES = [TraceNode(f"n{i}", 32000, 65536, 4, "T4") for i in range(5)]  # 20 GPUs = 20,000 milli


def pods(n: int, milli: int = 500, num: int = 1) -> list[TracePod]:
    return [TracePod(f"p{i:03d}", 1000, 1024, num, milli) for i in range(n)]


def test_tune_up_resamples_until_the_target() -> None:
    arrivals = build_arrivals(pods(10), NODES, seed=1, tune=1.3)  # 5,000 milli -> resample to 26,000
    total = sum(p.total_gpu_milli for p in arrivals.pods)
    assert total == 26_000
    assert len(arrivals.pods) == 52
    assert sorted(p.name for p in arrivals.pods[:10]) == [f"p{i:03d}" for i in range(10)]  # the whole list first
    assert len({p.name for p in arrivals.pods}) == 52


def test_tune_down_removes_at_random() -> None:
    arrivals = build_arrivals(pods(40, 1000, 2), NODES, seed=3, tune=1.3)  # 80,000 milli -> at most 26,000
    total = sum(p.total_gpu_milli for p in arrivals.pods)
    assert 24_000 < total <= 26_000


def test_same_seed_same_sequence_and_node_order() -> None:
    a = build_arrivals(pods(10), NODES, seed=7, tune=1.3)
    b = build_arrivals(pods(10), NODES, seed=7, tune=1.3)
    c = build_arrivals(pods(10), NODES, seed=8, tune=1.3)
    assert [p.name for p in a.pods] == [p.name for p in b.pods]
    assert a.node_rank == b.node_rank
    assert sorted(a.node_rank.values()) == list(range(5))
    assert [p.name for p in a.pods] != [p.name for p in c.pods] or a.node_rank != c.node_rank


def test_shifted_arrivals_change_the_mix_half_way() -> None:
    shares = pods(10)  # 500-milli shares
    whole = [TracePod(f"w{i:03d}", 1000, 1024, 2, 1000) for i in range(10)]  # 2 whole GPUs each
    arrivals = shifted_arrivals(shares, whole, NODES, seed=5, tune=1.3)
    first = [p for p in arrivals.pods if p.gpu_milli == 500]
    second = [p for p in arrivals.pods if p.gpu_milli == 1000]
    assert arrivals.pods == [*first, *second]  # every pod of the first list before any of the second
    assert sum(p.total_gpu_milli for p in first) == 13_000  # each list brings half of 130 % of 20 GPUs
    assert sum(p.total_gpu_milli for p in second) == 12_000  # cut down to the most 2,000-milli pods that fit
    assert all(p.name.startswith("b-w") for p in second)
    assert len({p.name for p in arrivals.pods}) == len(arrivals.pods)
    assert arrivals.node_rank == build_arrivals(shares, NODES, seed=5, tune=0.65).node_rank
    assert arrivals.target_milli == 26_000
    assert [p.name for p in shifted_arrivals(shares, whole, NODES, seed=5, tune=1.3).pods] == [
        p.name for p in arrivals.pods
    ]
