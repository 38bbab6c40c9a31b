"""packfrag keeps a GPU node's CPU for its free GPUs from pods asking no GPU, once the learned pods
ask more CPU per GPU than the cluster's GPU nodes have (packfrag.cpu_kept; design item 9 of
docs/results/better-than-fgd.md): such a pod may not take a node's free CPU below the learned GPU
pods' CPU per GPU milli times the node's free GPU milli, and waits when no other node is left."""

from __future__ import annotations

import random

import pytest

from runtimekit.model import NodeCapacity, NodeInventory, NodeName, NodeTable
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, NodeMeta
from runtimekit.scheduler.plugins.gpushare.plugin import REASON_CPU_KEPT, GpuSharePlugin
from runtimekit.scheduler.plugins.gpushare.policies import (
    PackFragPolicy,
    PodShape,
    PolicyContext,
    TargetWorkload,
    packfrag,
)
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType
from scheduler.helpers import cpu_only, job_of, rows, table_of, whole

GPU_POD = PodType(12_000, 1000, 1)  # 12 cores per GPU
CPU_POD = PodType(8000, 0, 0)
CPU_SHAPE = PodShape(cpu_milli=8000)
# every node has 128 cores (table_of's capacity) and 8 GPUs: 16 cores per GPU
NODES = [
    ("free", 128_000, [1000] * 8),  # keeps 8 x 12 = 96 cores: 128 - 8 = 120 left, allowed
    ("tight", 100_000, [1000] * 8),  # 100 - 8 = 92 < 96: kept
    ("half", 60_000, [1000, 1000, 1000, 1000, 0, 0, 0, 0]),  # keeps 48: 52 left, allowed
    ("full", 20_000, [0] * 8),  # no free GPU, nothing kept
]


def _kept(workload: TargetWorkload, reserve: float = packfrag.CPU_RESERVE, shape: PodShape = CPU_SHAPE) -> object:
    table = table_of(NODES)
    found = PackFragPolicy(workload, cpu_reserve=reserve).cpu_kept(
        PolicyContext(table, random.Random(1)), shape, rows(table, *(n for n, _, _ in NODES))
    )
    return None if found is None else found.tolist()


def test_once_cpu_is_scarce_a_gpu_less_pod_may_not_take_the_cpu_free_gpus_need() -> None:
    # 12 + 8 = 20 cores asked per GPU against 16 in the cluster: CPU runs out first
    assert _kept(TargetWorkload.from_types([GPU_POD, CPU_POD])) == [False, True, False, False]
    # half the reserve (6 cores per free GPU milli's worth): "tight" keeps 48 and 92 are left
    assert _kept(TargetWorkload.from_types([GPU_POD, CPU_POD]), reserve=0.5) == [False, False, False, False]


def test_nothing_is_kept_with_cpu_to_spare_for_gpu_pods_or_with_the_reserve_off() -> None:
    spare = TargetWorkload.from_types([GPU_POD, PodType(2000, 0, 0)])  # 14 cores per GPU of 16
    assert _kept(spare) is None
    scarce = TargetWorkload.from_types([GPU_POD, CPU_POD])
    assert _kept(scarce, reserve=0.0) is None
    assert _kept(scarce, shape=PodShape(cpu_milli=8000, milli=1000, count=1, whole=True)) is None


def test_a_learned_workload_keeps_cpu_only_once_enough_pods_are_learned() -> None:
    table = table_of(NODES)
    ctx, where = PolicyContext(table, random.Random(1)), rows(table, *(n for n, _, _ in NODES))
    policy = PackFragPolicy()
    for _ in range(packfrag.KEEP_AFTER // 2 - 1):
        policy.learn(GPU_POD)
        policy.learn(CPU_POD)
    assert policy.cpu_kept(ctx, CPU_SHAPE, where) is None
    for _ in range(packfrag.KEEP_AFTER):  # past KEEP_AFTER, and past the next relearn
        policy.learn(GPU_POD)
        policy.learn(CPU_POD)
    found = policy.cpu_kept(ctx, CPU_SHAPE, where)
    assert found is not None
    assert found.tolist() == [False, True, False, False]


def test_the_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="cpu_reserve"):
        PackFragPolicy(cpu_reserve=-1.0)


def _cache(*jobs: JobInfo) -> StaticCache:
    node = (
        NodeInventory.simulated("n1", "T4", 1, 16384),
        NodeCapacity(8000, 256 << 30, 110),  # 8 cores for its one GPU
        NodeMeta(NodeName("n1"), {}, (), False, "T4"),
    )
    cache = StaticCache([node])
    for job in jobs:
        cache.add_job(job)
    return cache


@pytest.mark.parametrize("reserve", ["1.0", "0"])
def test_a_pod_asking_no_gpu_waits_with_a_reason_where_only_kept_cpu_is_left(
    reserve: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packfrag, "KEEP_AFTER", 2)
    # learned: a pod of 2 GPUs and 12 cores (fits nowhere: 6 cores a GPU) and a CPU pod of 6 cores:
    # 9 cores asked per GPU against the node's 8. The node keeps 6 cores for its free GPU, so the
    # CPU pod (8 - 6 = 2 left) waits, unless the reserve is off.
    conf = (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n'
        f"    arguments: {{gpushare.policy: packfrag, gpushare.cpuReserve: {reserve}}}\n"
    )
    cache = _cache(job_of("two", whole(2, cpu=12_000)), job_of("cpu", cpu_only(6000), created=1.0))
    framework = Framework(parse_conf(conf), builtin_registry(), BuildContext())
    framework.run_once(cache)
    plugin = framework.plugin("gpushare")
    assert isinstance(plugin, GpuSharePlugin)
    policy = plugin.policies["packfrag"]
    assert isinstance(policy, PackFragPolicy)
    assert policy.cpu_reserve == float(reserve)
    waiting = {str(key): errors.message for key, errors in cache.unschedulable.items()}
    if reserve == "0":
        assert "cpu-0" not in waiting
    else:
        assert waiting["cpu-0"] == f"0/1 nodes are available: 1 {REASON_CPU_KEPT}."


def test_a_gpu_less_pod_kept_off_other_nodes_does_not_fall_back_on_a_rare_host() -> None:
    # g3 is the one 8-GPU node with 128 cores (the others have 96): a rare host, kept for 8-GPU pods
    # asking more than 96 cores. At half the reserve (6 cores per GPU: 48 per node) a 40-core pod
    # could take CPU on every node, but on g3 it would leave 88 cores, too few for such a pod.
    table = NodeTable()
    for name, cores in [("g3", 128_000), ("n1", 96_000), ("n2", 96_000), ("n3", 96_000), ("n4", 96_000)]:
        table.add_node(NodeInventory.simulated(name, "T4", 8, 16384), NodeCapacity(cores, 1 << 40, 110))
    policy = PackFragPolicy(TargetWorkload.from_types([GPU_POD, CPU_POD]), cpu_reserve=0.5)
    found = policy.cpu_kept(PolicyContext(table, random.Random(1)), PodShape(cpu_milli=40_000), rows(table, "g3", "n1"))
    assert found is not None
    assert found.tolist() == [True, False]
