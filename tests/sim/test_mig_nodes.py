"""Nodes in MIG mode in the simulator: the `h200-mig` shape, the trace's `mig` column, which profile a
pod asks for, replays with gpushare and mig side by side, and the bound that knows the slices."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from runtimekit.model import MigMode
from runtimekit.model.mig import geometry
from runtimekit.model.trace import TraceError, TraceNode, TracePod, parse_node_list, read_node_list
from runtimekit.sim.arrivals import Arrivals, build_arrivals
from runtimekit.sim.bound import bound_columns
from runtimekit.sim.mig_nodes import MigRule, mig_inventory
from runtimekit.sim.replay import Cluster, replay, target_workload

BALANCED = ("1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb")  # NVIDIA's all-balanced on an H200
HEADER = "sn,cpu_milli,memory_mib,gpu,model,mig\n"


@pytest.fixture
def shapes(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("cluster_shapes")


def share(name: str, milli: int, gpus: int = 1) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli)


def test_the_mig_shape_has_a_third_of_its_nodes_in_mig_mode_with_the_documented_layout(
    shapes: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "openb_pod_list_x.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,500\n")
    for shape in ("h200", "h200-mig"):
        shapes.write_shape(shape, str(tmp_path / "in"), tmp_path / "out", ["x"])
    nodes = read_node_list(tmp_path / "out" / "h200-mig" / "openb_node_list_gpu_node.csv")
    plain = read_node_list(tmp_path / "out" / "h200" / "openb_node_list_gpu_node.csv")
    mig = [n for n in nodes if n.mig]
    assert (len(nodes), len(mig), sum(n.gpus for n in nodes)) == (400, 133, 3200)
    assert {n.mig for n in mig} == {(BALANCED,) * 4 + (("7g.141gb",),) * 4}
    # the rest are the h200 shape's nodes, and its file has no mig column
    assert [(n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in nodes if not n.mig] == [
        (n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in plain[:267]
    ]
    assert "mig" not in (tmp_path / "out" / "h200" / "openb_node_list_gpu_node.csv").read_text().splitlines()[0]
    inventory = mig_inventory(mig[0])
    assert {g.mig_mode for g in inventory.gpus} == {MigMode.STATIC}
    # a 1g instance may not start at slice 7 (nvidia-smi mig -lgipp), so the 3g takes slices 4-7
    assert [(d.profile, d.start) for d in inventory.gpus[0].mig_devices] == [
        ("2g.35gb", 0),
        ("1g.18gb", 2),
        ("1g.18gb", 3),
        ("3g.71gb", 4),
    ]
    assert [(d.profile, d.start) for d in inventory.gpus[7].mig_devices] == [("7g.141gb", 0)]
    rule = MigRule(nodes)
    assert rule.instances == {"1g.18gb": 133 * 8, "2g.35gb": 133 * 4, "3g.71gb": 133 * 4, "7g.141gb": 133 * 4}


@pytest.mark.parametrize(
    ("mig", "why"),
    [
        ("1g.18gb+9g.1gb", "no MIG profile '9g.1gb'"),
        ("3g.71gb+3g.71gb+2g.35gb", "more compute slices"),
        ("3g.71gb+3g.71gb+1g.18gb", "does not fit"),  # 7 compute slices, but the 3g ones take all 8 memory slices
        ("1g.18gb/1g.18gb/1g.18gb", "3 layouts for 2 GPUs"),
    ],
)
def test_a_mig_layout_that_no_gpu_can_have_is_refused_with_its_line(mig: str, why: str) -> None:
    with pytest.raises(TraceError, match=rf"<nodes>:2: column 'mig': .*{why}"):
        parse_node_list(HEADER + f"n,1000,1000,2,H200,{mig}\n")


def test_a_mig_layout_needs_a_model_with_mig() -> None:
    with pytest.raises(TraceError, match="no MIG mode"):
        parse_node_list(HEADER + "n,1000,1000,2,L40S,1g.18gb\n")
    node = parse_node_list(HEADER + "n,1000,1000,2,H200,7g.141gb\nm,1000,1000,2,H200,\n")
    assert [n.mig for n in node] == [(("7g.141gb",), ("7g.141gb",)), ()]


@pytest.mark.parametrize(
    ("pod", "profile"),
    [
        # H200 (143,771 MiB): 1g.18gb holds 16,384 MiB = 0.1139 of the memory, 1/7 of the compute
        (share("a", 113), "1g.18gb"),
        (share("b", 114), "2g.35gb"),  # 2g.35gb: 32,768 MiB = 0.2279
        (share("c", 227), "2g.35gb"),
        (share("d", 228), "3g.71gb"),  # 3g.71gb: 3/7 = 0.4286 of the compute binds first
        (share("e", 428), "3g.71gb"),
        (share("f", 429), "7g.141gb"),  # 143,360 MiB = 0.9971
        (share("g", 997), "7g.141gb"),
        (share("h", 998), None),
        (share("i", 1000), None),  # whole GPUs never take MIG
        (share("j", 100, gpus=2), None),  # nor shares of several GPUs
        (TracePod("k", 1000, 1024, 0, 0), None),
    ],
)
def test_a_share_asks_for_the_smallest_offered_profile_that_holds_it(pod: TracePod, profile: str | None) -> None:
    nodes = [TraceNode("m", 1000, 1000, 2, "H200", mig=(BALANCED, ("7g.141gb",))), TraceNode("n", 1, 1, 1, "H200")]
    assert MigRule(nodes).profile(pod) == profile


def test_without_7g_instances_a_large_share_stays_a_share() -> None:
    rule = MigRule([TraceNode("m", 1000, 1000, 1, "H200", mig=(BALANCED,))])
    assert (rule.profile(share("a", 300)), rule.profile(share("b", 429))) == ("3g.71gb", None)
    assert not MigRule([TraceNode("n", 1000, 1000, 1, "H200")])


def _in_order(pods: list[TracePod], nodes: list[TraceNode]) -> Arrivals:
    return Arrivals(pods, {n.name: i for i, n in enumerate(nodes)}, sum(p.total_gpu_milli for p in pods))


@pytest.mark.parametrize("policy", ["fgd", "packfrag"])
def test_shares_take_free_slices_first_then_a_plain_gpu_and_whole_gpus_never_a_slice(policy: str) -> None:
    mig_node = TraceNode("m", 64_000, 65_536, 1, "H200", mig=(BALANCED,))
    pods = [share("s1", 100), share("s2", 100), share("s3", 100), share("t", 200), share("u", 300), share("w", 1000)]
    alone = replay([mig_node], _in_order(pods, [mig_node]), policy, 42, target_workload(pods))
    # two 1g.18gb instances, the 2g and the 3g; the third small share has no slice and no plain GPU
    assert (alone.used_milli[-1], alone.failed_pods) == (700, 2)
    nodes = [mig_node, TraceNode("p", 64_000, 65_536, 1, "H200")]
    both = replay(nodes, _in_order(pods, nodes), policy, 42, target_workload(pods))
    assert both.used_milli == [100, 200, 300, 500, 800, 800]  # s3 on the plain GPU, so w finds it taken
    assert both.failed_pods == 1
    assert both.total_gpus == 2


def test_the_bound_counts_what_the_slices_can_hold_and_stays_above_the_replays() -> None:
    nodes = [TraceNode("m", 64_000, 65_536, 1, "H200", mig=(BALANCED,)), TraceNode("p", 64_000, 65_536, 1, "H200")]
    pods = [share(f"s{i}", 100) for i in range(6)] + [share(f"w{i}", 1000) for i in range(2)]
    rule = MigRule(nodes)
    assert rule.capacity(pods) == 200  # two 1g.18gb instances; whole pods never take one
    arrivals = build_arrivals(pods, nodes, 42, 1.3)
    bound = bound_columns(nodes, arrivals, 42, [100, 130], plans="none")
    for policy in ("fgd", "packfrag"):
        result = replay(nodes, arrivals, policy, 42, target_workload(pods))
        for column, cell in bound.columns.items():
            value = result.columns[column]
            assert value is not None
            assert value <= cell.upper + 1e-9
    # treating the MIG GPU as a plain one the same pods would fill both GPUs: the slices bind here
    as_plain = [TraceNode(n.name, n.cpu_milli, n.memory_mib, 1, "H200") for n in nodes]
    plain = bound_columns(as_plain, arrivals, 42, [130], plans="none")
    assert bound.columns["130"].upper <= (1000 + 200) / 20 < plain.columns["130"].upper


def test_the_geometry_the_layout_names_is_the_h200s() -> None:
    geo = geometry("H200")
    assert geo is not None
    assert {p.name: p.memory_mib for p in geo.profiles if p.name in {*BALANCED, "7g.141gb"}} == {
        "1g.18gb": 16384,
        "2g.35gb": 32768,
        "3g.71gb": 65536,
        "7g.141gb": 143360,
    }


@pytest.mark.slow
def test_a_small_mig_cluster_replays_the_bundled_list_under_its_bound(shapes: ModuleType) -> None:
    from runtimekit.model.trace import read_pod_list
    from runtimekit.sim.runner import bundled

    layout = tuple(tuple(g.split("+")) for g in shapes.MIG_LAYOUT["h200mig"].split("/"))
    nodes = [TraceNode(f"p{i}", 224_000, 2_097_152, 8, "H200") for i in range(8)]
    nodes += [TraceNode(f"m{i}", 224_000, 2_097_152, 8, "H200", mig=layout) for i in range(4)]
    pods = read_pod_list(bundled("openb_pod_list_default.csv"))
    cluster = Cluster(nodes)
    arrivals = build_arrivals(pods, nodes, 42, 1.3)
    workload = target_workload(pods)
    bound = bound_columns(nodes, arrivals, 42, [100], plans="none")
    for policy in ("fgd", "packfrag"):
        result = replay(cluster, arrivals, policy, 42, workload)
        assert replay(cluster, arrivals, policy, 42, workload).used_milli == result.used_milli
        at_100 = result.columns["100"]
        assert at_100 is not None
        # more than the plain two thirds can hold: the slices took pods, and nothing passes the bound
        assert 100 * 8 / 12 < at_100 <= bound.columns["100"].upper + 1e-9


def test_the_floor_and_set_limits_refuse_mig_nodes_they_would_not_bound() -> None:
    from runtimekit.sim.floor_bound import floor_columns, set_columns

    nodes = [TraceNode("m", 64_000, 65_536, 1, "H200", mig=(BALANCED,)), TraceNode("p", 64_000, 65_536, 1, "H200")]
    pods = [share("s", 100)]
    with pytest.raises(ValueError, match="MIG mode"):
        floor_columns(nodes, pods, [100], [100])
    with pytest.raises(ValueError, match="MIG mode"):
        set_columns(nodes, pods, [0], [100])
