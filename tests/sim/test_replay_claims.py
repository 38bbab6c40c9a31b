"""Trace replay through ResourceClaims (`runtimekit simulate --through-claims`): the nodes publish the
DRA plugin's ResourceSlices, every pod asks through a claim of the kit's GPU class, and the
`dynamicresources` plugin allocates them; what is placed is compared with the device-plugin replay."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from runtimekit.cli.main import main
from runtimekit.cli.sim_dra import kit_publication, node_slices
from runtimekit.draplugin.names import KIT_DRIVER
from runtimekit.model import NodeInventory
from runtimekit.model.trace import TraceError, TraceNode, TracePod, read_node_list, read_pod_list
from runtimekit.sim.arrivals import Arrivals, build_arrivals
from runtimekit.sim.claims import claim_template
from runtimekit.sim.replay import Cluster, Placed, ReplayResult, replay, target_workload
from runtimekit.sim.runner import DEFAULT_NODES, DEFAULT_PODS, bundled

NODES = [
    TraceNode(f"n{i}", 32_000, 131_072, gpus, model)
    for i, (gpus, model) in enumerate(((4, "V100M16"), (2, "T4"), (2, "V100M16"), (1, "T4"), (0, "")))
]
PODS = [
    TracePod(f"p{i}", cpu, 4096, gpus, milli, spec)
    for i, (cpu, gpus, milli, spec) in enumerate(
        [(4000, 1, 500, ""), (8000, 2, 1000, ""), (2000, 1, 250, "T4"), (6000, 0, 0, ""), (3000, 1, 470, "V100M16")] * 4
    )
]


def _check_grants(result: ReplayResult, pods: list[TracePod]) -> None:
    """Every GPU pod placed got its claim allocated on the node it went to, as much as it asked, of a
    model it allows; no GPU is granted past its capacity, and a whole GPU is nobody else's."""
    held: dict[str, list[int]] = defaultdict(list)
    for placed in result.where:
        pod = pods[placed.index]
        if not pod.num_gpu:
            assert placed.claimed == ()
            continue
        assert len(placed.claimed) == pod.num_gpu
        for uuid, milli in placed.claimed:
            assert milli == pod.gpu_milli
            held[uuid].append(milli)
    for shares in held.values():
        assert sum(shares) <= 1000
        assert 1000 not in shares or len(shares) == 1


def test_the_slices_are_the_dra_plugins_for_the_nodes_gpus() -> None:
    inventory = NodeInventory.simulated("n0", "V100M16", 2)
    (published,) = node_slices(inventory)
    spec = published["spec"]
    assert spec.get("driver") == KIT_DRIVER
    assert spec.get("nodeName") == "n0"
    assert spec.get("pool") == {"name": "n0", "generation": 1, "resourceSliceCount": 1}
    devices = spec.get("devices") or []
    assert [d.get("name") for d in devices] == ["gpu-0", "gpu-1"]
    assert [(d.get("attributes") or {})["uuid"] for d in devices] == [{"string": g.uuid} for g in inventory.gpus]
    assert all(d.get("allowMultipleAllocations") for d in devices)  # shares are consumable capacity


def test_a_share_asks_core_in_percent_and_whole_gpus_ask_a_count() -> None:
    share = claim_template(TracePod("p", 1000, 1024, 1, 470, "T4|A10"), KIT_DRIVER, "t")
    (request,) = share["spec"]["spec"].get("devices", {}).get("requests") or []
    exactly = request.get("exactly") or {}
    assert exactly.get("deviceClassName") == "gpu.runtimekit.aliyun.com"
    assert exactly.get("count") == 1
    assert exactly.get("capacity") == {"requests": {"core": "47", "memory": "0"}}
    whole = claim_template(TracePod("p", 1000, 1024, 2, 1000, ""), KIT_DRIVER, "t")
    (request,) = whole["spec"]["spec"].get("devices", {}).get("requests") or []
    assert request.get("exactly") == {
        "deviceClassName": "gpu.runtimekit.aliyun.com",
        "allocationMode": "ExactCount",
        "count": 2,
    }


@pytest.mark.parametrize("policy", ["bestfit", "fgd"])
def test_through_claims_every_gpu_pod_is_allocated_its_claim_and_no_gpu_is_over_granted(policy: str) -> None:
    arrivals = build_arrivals(PODS, NODES, 42, 1.3)
    cluster = Cluster(NODES)
    devices = replay(cluster, arrivals, policy, 42, target_workload(PODS), record=True)
    claims = replay(cluster, arrivals, policy, 42, target_workload(PODS), claims=kit_publication(), record=True)
    pods = list(arrivals.pods)
    _check_grants(claims, pods)
    assert 0 < claims.failed_pods < claims.arrived_pods == devices.arrived_pods  # the list overfills the cluster
    assert len(claims.where) == len(claims.placed)
    models = {n.name: n.model for n in NODES}
    for placed in claims.where:
        allowed = pods[placed.index].allowed_models()
        assert allowed is None or models[placed.node] in allowed  # the pod's model annotation held
    assert all(p.claimed == p.booked for p in claims.where if p.claimed)  # the ledger booked the claims
    assert all(p.claimed == () and p.gpus == p.booked for p in devices.where)


def test_simulate_through_claims_reports_the_same_columns(tmp_path: Path) -> None:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model}\n" for n in NODES)
    )
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
        + "".join(f"{p.name},{p.cpu_milli},{p.memory_mib},{p.num_gpu},{p.gpu_milli},{p.gpu_spec},LS\n" for p in PODS)
    )
    out = tmp_path / "r.json"
    args = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit", "--seeds", "7", "--quiet"]
    assert main([*args, "--through-claims", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["through_claims"] is True
    (run,) = report["results"]
    assert set(run) == {"policy", "seed", "columns", "arrived_pods", "failed_pods", "total_gpus", "seconds"}
    assert len(run["columns"]) == 131
    assert run["total_gpus"] == 9
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["through_claims"] is False


@pytest.fixture(scope="module")
def openb() -> tuple[list[TraceNode], list[TracePod]]:
    """The bundled openb GPU node list and default pod list (read once for the module)."""
    return read_node_list(str(bundled(DEFAULT_NODES))), read_pod_list(str(bundled(DEFAULT_PODS)))


def _same_placements(nodes: list[TraceNode], pods: list[TracePod], policy: str, seed: int) -> None:
    arrivals = build_arrivals(pods, nodes, seed, 1.3)
    cluster, workload = Cluster(nodes), target_workload(pods)
    devices = replay(cluster, arrivals, policy, seed, workload, record=True)
    claims = replay(cluster, arrivals, policy, seed, workload, claims=kit_publication(), record=True)
    _check_grants(claims, list(arrivals.pods))
    assert [_where(p) for p in claims.where] == [_where(p) for p in devices.where]
    assert claims.columns == devices.columns
    assert claims.failed_pods == devices.failed_pods
    assert all(p.claimed == p.booked for p in claims.where if p.claimed)  # the ledger booked the claims


def _where(placed: Placed) -> tuple[int, str, tuple[tuple[str, int], ...]]:
    return placed.index, placed.node, placed.gpus


def test_through_claims_places_what_the_device_plugin_path_places_on_the_mixed_list() -> None:
    arrivals = build_arrivals(PODS, NODES, 7, 1.3)
    cluster, workload = Cluster(NODES), target_workload(PODS)
    for policy in ("fgd", "packfrag"):
        devices = replay(cluster, arrivals, policy, 7, workload, record=True)
        claims = replay(cluster, arrivals, policy, 7, workload, claims=kit_publication(), record=True)
        assert [_where(p) for p in claims.where] == [_where(p) for p in devices.where]
        assert claims.columns == devices.columns


@pytest.mark.parametrize("policy", ["fgd", "packfrag"])
def test_an_openb_slice_through_claims_places_the_same_pods_on_the_same_gpus(
    policy: str, openb: tuple[list[TraceNode], list[TracePod]]
) -> None:
    nodes, pods = openb
    _same_placements(nodes[:8], pods, policy, 42)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # minutes per policy through claims (see docs/user-guide/simulator.md)
@pytest.mark.parametrize("policy", ["fgd", "packfrag", "bestfit"])  # the claim path does not depend on the score
def test_a_larger_openb_slice_through_claims_places_the_same_pods_on_the_same_gpus(
    policy: str, openb: tuple[list[TraceNode], list[TracePod]]
) -> None:
    nodes, pods = openb
    _same_placements(nodes[:40], pods, policy, 43)  # some 300 arrivals


def test_a_node_list_with_mig_nodes_is_refused_through_claims_with_a_clear_error() -> None:
    nodes = [TraceNode("m0", 8000, 65536, 1, "H200", mig=(("1g.18gb",) * 7,))]
    with pytest.raises(TraceError, match="MIG mode"):
        replay(nodes, Arrivals([], {}, 0), "fgd", 42, None, claims=kit_publication())
