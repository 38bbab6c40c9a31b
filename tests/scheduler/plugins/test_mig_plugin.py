"""The mig plugin: placements that keep the largest profiles placeable, static layouts, mixed
nodes, gangs, and reasons."""

from __future__ import annotations

from runtimekit.model import (
    ContainerGpuRequest,
    GpuKind,
    GpuRequest,
    MigMode,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
    PodRequest,
)
from runtimekit.model.gpu import Gpu, MigInstance, simulated_uuid
from runtimekit.model.mig import mask
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, load_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey, NodeMeta, TaskInfo
from scheduler.helpers import share


def mig(profile: str, count: int = 1) -> PodRequest:
    return PodRequest(1000, 1024, (ContainerGpuRequest("main", GpuRequest(GpuKind.MIG, count, 0, None, profile)),))


def node(name: str, modes: list[MigMode], layouts: dict[int, tuple[MigInstance, ...]] | None = None) -> NodeInventory:
    gpus = tuple(
        Gpu(i, simulated_uuid(name, i), "A100-80GB", 81920, mig_mode=m, mig_devices=(layouts or {}).get(i, ()))
        for i, m in enumerate(modes)
    )
    return NodeInventory(NodeName(name), gpus)


def run(inventories: list[NodeInventory], jobs: list[tuple[str, list[PodRequest], int]]) -> StaticCache:
    cache = StaticCache(
        [(inv, NodeCapacity(64000, 1 << 40, 110), NodeMeta(inv.node, gpu_model="A100-80GB")) for inv in inventories]
    )
    for i, (name, requests, min_member) in enumerate(jobs):
        job = JobInfo(JobKey(name), "default", name, min_member=min_member, created=float(i))
        for j, request in enumerate(requests):
            job.add(TaskInfo(PodKey(f"{name}-{j}"), "default", f"{name}-{j}", job.key, request, created=float(i)))
        cache.add_job(job)
    Framework(load_conf(None), builtin_registry(), BuildContext()).run_once(cache)
    return cache


def slots(cache: StaticCache, pod: str) -> list[tuple[str, int, str, int]]:
    placement = cache.bound[PodKey(pod)].placement
    assert placement is not None
    return [(str(placement.node), s.gpu, s.mig_profile, s.mig_start) for s in placement.slots]


def test_small_slices_pack_and_keep_a_whole_gpu_free() -> None:
    d = MigMode.DYNAMIC
    cache = run([node("a", [d, d])], [(f"s{i}", [mig("1g.10gb")], 1) for i in range(3)])
    placed = sorted(slots(cache, f"s{i}-0")[0][1:] for i in range(3))
    assert {g for g, _, _ in placed} == {0}  # all on one GPU: GPU 1 can still take a 7g.80gb
    state = cache.ledger.table.mig[cache.ledger.table.row("a")]
    assert state[1].occupied == 0


def test_a_large_slice_goes_where_it_costs_least() -> None:
    d = MigMode.DYNAMIC
    cache = run([node("a", [d, d])], [("small", [mig("1g.10gb")], 1), ("big", [mig("4g.40gb")], 1)])
    small = slots(cache, "small-0")[0]
    big = slots(cache, "big-0")[0]
    assert small[1] == big[1]  # the 4g shares the GPU the 1g already cut
    assert big[3] == 0
    assert small[3] >= 4


def test_static_layout_and_mixed_node() -> None:
    layout = {0: (MigInstance("MIG-x", "3g.40gb", 0), MigInstance("MIG-y", "3g.40gb", 4))}
    cache = run(
        [node("n", [MigMode.STATIC, MigMode.OFF], layout)],
        [
            ("m1", [mig("3g.40gb")], 1),
            ("m2", [mig("3g.40gb")], 1),
            ("m3", [mig("3g.40gb")], 1),
            ("sh", [share(500)], 1),
            ("no", [mig("1g.10gb")], 1),
        ],
    )
    assert sorted(slots(cache, p)[0][3] for p in ("m1-0", "m2-0")) == [0, 4]
    assert PodKey("m3-0") not in cache.bound
    assert "no free MIG slot for 3g.40gb" in cache.unschedulable[PodKey("m3-0")].message
    placement = cache.bound[PodKey("sh-0")].placement
    assert placement is not None
    assert placement.slots[0].gpu == 1  # shares only on the non-MIG GPU
    assert PodKey("no-0") not in cache.bound


def test_a_gang_of_mig_pods_is_all_or_nothing() -> None:
    d = MigMode.DYNAMIC
    cache = run(
        [node("a", [d])], [("gang", [mig("4g.40gb"), mig("4g.40gb")], 2), ("ok", [mig("3g.40gb"), mig("3g.40gb")], 2)]
    )
    assert PodKey("gang-0") not in cache.bound
    assert PodKey("gang-1") not in cache.bound
    assert sorted(slots(cache, p)[0][3] for p in ("ok-0", "ok-1")) == [0, 4]
    assert cache.ledger.table.mig[0][0].occupied == mask(0, 8)


def test_mig_pods_on_nodes_without_mig_say_why() -> None:
    cache = run([node("plain", [MigMode.OFF])], [("m", [mig("1g.10gb")], 1)])
    assert cache.unschedulable[PodKey("m-0")].message == "0/1 nodes are available: 1 no GPU in MIG mode."
