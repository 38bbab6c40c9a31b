"""benchmarks/scheduler_perf.py: kube-scheduler's scheduler_perf workload files read and played end to end.

The files under benchmarks/scheduler_perf/ are kube's own (test data); these tests hold the reading of
them (params put in, labels and featureGates twins selected, scaling) to what scheduler_perf does, and
play the smallest workloads (kube's `integration-test` ones) through the real opcode interpreter
against the embedded API server with the live scheduler in process: every measured pod bound, and the
figures in the JSON shape the bench prints. The whole bench (API server and scheduler in processes of
their own) is the slow test at the end.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from fixtures.waiting import wait_for
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.controllers.manager import ControllerManager
from runtimekit.cluster.controllers.resourceclaims import ResourceClaimController
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from runtimekit.scheduler.framework.conf import DEFAULT_CONF_TEXT

P = KitProtocol.default()


@pytest.fixture
def perf(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("scheduler_perf")


def by_name(perf: ModuleType, name: str) -> Any:
    return next(w for w in perf.load() if w.full_name == name)


def test_every_workload_file_parses_and_names_templates_that_exist(perf: ModuleType) -> None:
    workloads = perf.load()
    assert {w.case for w in workloads} >= {
        "SchedulingBasic",
        "SchedulingPodAntiAffinity",
        "SchedulingPodAffinity",
        "SchedulingPreferredPodAffinity",
        "SchedulingPreferredPodAntiAffinity",
        "SchedulingNodeAffinity",
        "MixedSchedulingBasePod",
        "Unschedulable",
        "SchedulingWithMixedChurn",
        "TopologySpreading",
        "PreferredTopologySpreading",
        "SchedulingWithResourceClaimTemplate",
        "SteadyStateClusterResourceClaimTemplate",
    }
    for w in workloads:
        ops = w.resolved()  # every $param of the template is among the workload's params
        paths = [w.default_pod_template] if w.default_pod_template else []
        for op in ops:
            keys = ("podTemplatePath", "nodeTemplatePath", "namespaceTemplatePath", "templatePath")
            paths += [op[k] for k in keys if k in op]
            paths += op.get("templatePaths", [])
            paths += [op["createPodsOp"].get("podTemplatePath")] if "createPodsOp" in op else []
        for path in filter(None, paths):
            assert (w.base / path).is_file(), f"{w.full_name}: {path}"


def test_params_are_put_in_as_scheduler_perf_does(perf: ModuleType) -> None:
    w = by_name(perf, "SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods")
    ops = w.resolved()
    assert [op["opcode"] for op in ops] == [
        "createNodes",
        "createNamespaces",
        "createNamespaces",
        "createPodSets",
        "createPods",
    ]
    assert ops[0]["count"] == 6000  # this workload's file gives 6,000 nodes under the 5000Nodes name
    assert ops[1] == {
        "opcode": "createNamespaces",
        "prefix": "init-ns",
        "count": 100,
        "namespaceTemplatePath": "../templates/namespace-with-labels.yaml",
    }
    assert ops[3]["createPodsOp"] == {"opcode": "createPods", "count": 40}
    assert (ops[4]["count"], ops[4]["collectMetrics"], ops[4]["namespace"]) == (2000, True, "measure-ns-0")
    assert w.threshold == 24
    with pytest.raises(KeyError, match=r"\$initNodes"):
        perf.substitute({"opcode": "createNodes", "countParam": "$initNodes"}, {})


def test_selection_by_label_and_regex_runs_feature_gate_twins_once(perf: ModuleType) -> None:
    chosen, skipped = perf.select(perf.load(), "^SchedulingBasic/", "performance")
    assert [w.full_name for w in chosen] == [
        "SchedulingBasic/5000Nodes_10000Pods",
        "SchedulingBasic/5000Nodes_50000Pods",
    ]
    assert [(w.threshold, w.nodes()) for w in chosen] == [(680, 5000), (810, 5000)]
    assert [s["workload"] for s in skipped] == [
        "SchedulingBasic/5000Nodes_50000Pods_AsyncAPICallsEnabled",
        "SchedulingBasic/5000Nodes_50000Pods_NodeDeclaredFeaturesDisabled",
    ]
    chosen, _ = perf.select(perf.load(), "^SchedulingBasic/", "integration-test")
    assert [w.full_name for w in chosen] == ["SchedulingBasic/5Nodes"]


def test_scaling_down_keeps_the_proportions(perf: ModuleType) -> None:
    w = perf.scale(by_name(perf, "SchedulingPodAntiAffinity/5000Nodes_2000Pods"), 500)
    assert (w.params, w.scaled, w.threshold) == ({"initNodes": 500, "initPods": 100, "measurePods": 200}, True, 60)
    small = by_name(perf, "SchedulingBasic/5Nodes")
    assert perf.scale(small, 500) is small  # never scaled up


def test_throughput_percentiles_are_scheduler_perfs(perf: ModuleType) -> None:
    # scheduler_perf: sorted, the ceil(n*q/100)-th value
    assert [perf.percentile([5.0, 1.0, 4.0, 2.0, 3.0], q) for q in (50, 90, 99)] == [3.0, 5.0, 5.0]


@pytest.fixture
def live(apiserver: ApiServer) -> Iterator[str]:
    http = KubeHttp.connect(server=apiserver.url)
    config = SchedulerConfig(
        kube=http,
        conf=parse_conf(DEFAULT_CONF_TEXT),
        scheduler_names=("default-scheduler",),
        keys=AssignmentKeys(required=False),
        period=0.02,
    )
    scheduler = build_scheduler(config).start()
    try:
        assert scheduler.synced(10)
        yield apiserver.url
    finally:
        scheduler.stop()
        http.close()


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("SchedulingPodAntiAffinity/5Nodes", 0),  # createNamespaces, pods in sched-0/sched-1
        ("SchedulingRequiredPodAntiAffinityWithNSSelector/10Nodes", 0),  # createPodSets, namespace templates
        ("TopologySpreading/5Nodes", 25),  # labelNodePrepareStrategy, the GPU variant
    ],
)
def test_smallest_workloads_bind_every_measured_pod(perf: ModuleType, live: str, name: str, gpu: int) -> None:
    from scheduler_perf_ops import Runner

    w = by_name(perf, name)
    runner = Runner(live, w.base, gpu_share=gpu)
    runner.timeout = 20
    measured = runner.run(w.ops, w.params, w.default_pod_template)
    result = perf.figures(w, measured, runner.bound)
    assert result["measured_pods"] == w.params["measurePods"]
    assert result["bound"] == result["measured_pods"]
    assert set(result) >= {"SchedulingThroughput", "pods_per_second_overall", "threshold", "latency_seconds"}
    assert "pods_per_scheduler_cpu_second" in result
    assert set(result["latency_seconds"]) == {"p50", "p90", "p99"}
    assert result["pods_per_second_overall"] > 0
    nodes = KubeHttp.connect(server=live).list("/api/v1/nodes")[0]
    assert len(nodes) == w.nodes()
    assert all(n["metadata"]["labels"]["kubernetes.io/hostname"] == n["metadata"]["name"] for n in nodes)
    if name.startswith("TopologySpreading"):
        zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
        assert zones <= {"moon-1", "moon-2", "moon-3"}
    if gpu:
        pods = KubeHttp.connect(server=live).list("/api/v1/pods")[0]
        assert all(p["spec"]["containers"][0]["resources"]["limits"][P.resources.core] in (25, "25") for p in pods)


@pytest.fixture
def claims_live(live: str) -> Iterator[str]:
    """`live` with the ResourceClaim controller, which makes the pods' claims from their templates."""
    manager = ControllerManager(KubeHttp.connect(server=live), [ResourceClaimController]).start()
    try:
        assert manager.synced(10)
        yield live
    finally:
        manager.stop()


def test_dra_workloads_allocate_each_pods_claim_on_its_node(perf: ModuleType, claims_live: str) -> None:
    """kube's DRA workload (createResourceDriver, createAny, claims from a template): every measured
    pod bound to the node whose slice its claim's device is in, reserved for it; the node without the
    driver gets none; and allocResourceClaims fills devices without pods, which no pod is given again."""
    from scheduler_perf_ops import Runner

    w = by_name(perf, "SchedulingWithResourceClaimTemplate/fast")
    runner = Runner(claims_live, w.base)
    runner.timeout = 20
    measured = runner.run(w.ops, w.params, w.default_pod_template)
    result = perf.figures(w, measured, runner.bound)
    assert result["bound"] == result["measured_pods"] == 10
    http = KubeHttp.connect(server=claims_live)
    pods = {p["metadata"]["name"]: p for p in http.list("/api/v1/namespaces/test/pods")[0]}
    claims = http.list("/apis/resource.k8s.io/v1/namespaces/test/resourceclaims")[0]
    assert len(claims) == 10
    devices = set()
    for claim in claims:
        (owner,) = claim["metadata"]["ownerReferences"]
        node = pods[owner["name"]]["spec"]["nodeName"]
        assert node == "scheduler-perf-dra-0"
        (result_,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result_["driver"], result_["pool"]) == ("test-driver.cdi.k8s.io", node)
        devices.add(result_["device"])
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [owner["name"]]
    assert devices == {f"instance-{i}" for i in range(10)}  # the node's ten devices, each once
    # the pods go: their claims are deleted by the controller, so the devices are free again
    for name in pods:
        http.delete(f"/api/v1/namespaces/test/pods/{name}?gracePeriodSeconds=0")
    wait_for(lambda: not http.list("/apis/resource.k8s.io/v1/namespaces/test/resourceclaims")[0], 20, "claims freed")
    steady = by_name(perf, "SteadyStateClusterResourceClaimTemplate/fast")
    ops = [op for op in steady.ops if op["opcode"] in ("createAny", "allocResourceClaims")][1:3]
    runner = Runner(claims_live, steady.base)
    runner.run(ops, {"initClaims": 4}, None)  # four claims of namespace init, allocated without pods
    held = http.list("/apis/resource.k8s.io/v1/namespaces/init/resourceclaims")[0]
    assert len(held) == 4
    assert all(c["status"]["allocation"]["devices"]["results"][0]["pool"] for c in held)
    http.close()


@pytest.mark.slow
def test_the_bench_runs_end_to_end_and_prints_each_figure_beside_its_threshold(
    perf: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        perf.main(["--label", "performance", "--workload", "^SchedulingBasic/5000Nodes_10000Pods$", "--nodes", "50"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    (result,) = report["workloads"]
    assert (result["workload"], result["threshold"], result["scaled"]) == (
        "SchedulingBasic/5000Nodes_10000Pods",
        680,
        True,
    )
    assert result["bound"] == result["measured_pods"] == 100
    assert result["scheduler_rss_mib"] > 0
    # the three processes sharing the cores each did work for the measured pods
    assert all(result["cpu_ms_per_pod"][p] > 0 for p in ("scheduler", "apiserver", "client"))
    assert isinstance(result["meets_threshold"], bool)
    assert sys.platform != "linux" or result["load_average"]
