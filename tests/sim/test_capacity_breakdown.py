"""benchmarks/capacity_breakdown.py: the unallocated GPU capacity at a column, read from where a
replay put each pod."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from runtimekit.model.trace import TraceNode, TracePod
from runtimekit.sim.arrivals import build_arrivals
from runtimekit.sim.replay import Placed, replay, target_workload


@pytest.fixture
def breakdown(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("capacity_breakdown")


def test_the_state_counts_free_gpus_leftovers_and_gpus_stranded_behind_cpu(breakdown: ModuleType) -> None:
    nodes = [TraceNode("a", 8000, 65_536, 4, "T4"), TraceNode("b", 8000, 65_536, 2, "T4")]
    pods = [
        TracePod("s810", 1000, 1024, 1, 810),
        TracePod("s470", 1000, 1024, 1, 470),
        TracePod("cpu", 7500, 1024, 0, 0),
        TracePod("late", 1000, 1024, 1, 100),
    ]
    where = [
        Placed(0, "a", (("GPU-a0", 810),)),
        Placed(1, "a", (("GPU-a1", 470),)),
        Placed(2, "b", ()),
        Placed(3, "a", (("GPU-a0", 100),)),
    ]
    state = breakdown.state_at(nodes, pods, where, 2)  # before the 100-milli pod
    assert state == {
        "unallocated": 4.7,  # a: 2 free GPUs, 190 and 530 milli left; b: 2 free GPUs
        "fully_free": 4,
        "fully_free_cpu_used_up": 2,  # b has 500 CPU milli left; every GPU pod asks 1,000
        "partly_used_0_99": 0.0,
        "partly_used_100_199": 0.2,
        "partly_used_200_up": 0.5,
        "partly_used_200_up_gpus": 1,
        "partly_used_200_up_stranded": 0.0,  # a has the CPU and memory for the 470 or the 100
    }
    # the 100-milli pod takes the rest of a's CPU: the 530 milli beside the 470 is now stranded
    crowded = [*pods[:3], TracePod("late", 6000, 1024, 1, 100)]
    assert breakdown.state_at(nodes, crowded, where, 3)["partly_used_200_up_stranded"] == 0.5


def test_the_state_at_a_replays_last_event_is_what_the_replay_left_unallocated(breakdown: ModuleType) -> None:
    nodes = [TraceNode(f"n{i}", 16_000, 131_072, gpus, "V100M16") for i, gpus in enumerate((8, 4, 2))]
    pods = [
        TracePod(f"p{i}", cpu, 4096, gpus, milli)
        for i, (cpu, gpus, milli) in enumerate([(2000, 1, 810), (4000, 2, 1000), (1000, 1, 470), (3000, 0, 0)] * 5)
    ]
    arrivals = build_arrivals(pods, nodes, 42, 1.3)
    result = replay(nodes, arrivals, "packfrag", 42, target_workload(pods), record=True)
    for last in (5, len(arrivals.pods) - 1):
        state = breakdown.state_at(nodes, arrivals.pods, result.where, last)
        assert state["unallocated"] == pytest.approx(14 - result.used_milli[last] / 1000, abs=0.15)
        partly = ("partly_used_0_99", "partly_used_100_199", "partly_used_200_up")
        parts = state["fully_free"] + sum(state[k] for k in partly)
        assert parts == pytest.approx(state["unallocated"], abs=0.15)
