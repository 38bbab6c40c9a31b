"""Replays on a `Cluster` built once: each starts from the empty cluster, whatever ran before."""

from __future__ import annotations

import pytest

from runtimekit.model import NodeName, PodKey
from runtimekit.model.ledger import Placement, Slot
from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.scheduler.cache import StaticCache
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.replay import Cluster, node_entries, replay, target_workload

NODES = [TraceNode(f"n{i}", 32_000, 131_072, gpus, "V100M16") for i, gpus in enumerate((8, 4, 2, 1, 0))]
PODS = [
    TracePod(f"p{i}", cpu, 4096, gpus, milli, "V100M16" if i % 7 == 0 else "")
    for i, (cpu, gpus, milli) in enumerate([(4000, 1, 500), (8000, 2, 1000), (2000, 1, 250), (6000, 0, 0)] * 6)
]


@pytest.mark.parametrize("policy", ["fgd", "bestfit", "packfrag"])
def test_replays_on_one_cluster_match_replays_on_the_node_list(policy: str) -> None:
    cluster = Cluster(NODES)
    arrivals = build_arrivals(PODS, NODES, 42, 1.3)
    workload = target_workload(PODS)
    fresh = replay(NODES, arrivals, policy, 42, workload)
    first = replay(cluster, arrivals, policy, 42, workload)
    again = replay(cluster, arrivals, policy, 42, workload)  # the first left nothing behind
    assert first.used_milli == fresh.used_milli == again.used_milli
    assert first.columns == fresh.columns
    assert 0 < first.failed_pods < first.arrived_pods  # the list overfills the cluster: some fail


def test_a_fresh_cache_copies_the_table_and_takes_the_new_rank() -> None:
    empty = StaticCache(node_entries(NODES))
    fresh = empty.fresh({"n4": 0, "n3": 1})
    table = fresh.ledger.table
    fresh.ledger.reserve(PodKey("a"), Placement(NodeName("n0"), 1000, 0, (Slot(0, 500, 0),)))
    assert empty.ledger.table.free_gpus("n0")[0][0] == 1000  # the template is untouched
    assert table.free_gpus("n0")[0][0] == 500
    assert fresh.rank[table.row("n4")] == 0
    assert fresh.rank[table.row("n0")] == 2  # unlisted nodes last
    with pytest.raises(ValueError, match="booked nothing"):
        fresh.fresh()
