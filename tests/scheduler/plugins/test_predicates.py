"""The `predicates` plugin against kube-scheduler's own tables (the facts of its filtering tests,
`tests/scheduler/kubesem/*_cases.py`), run through a real session, plus its Volcano arguments."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from runtimekit.scheduler.framework.arguments import ArgumentError
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.plugins import predicates
from scheduler.kubesem import interpod_cases, node_cases, spread_cases
from scheduler.kubesem.builders import Node, labelled, node, pod
from scheduler.plugins.kube_harness import cache_of, reasons, session_of

Json = dict[str, Any]


@pytest.mark.parametrize(("nodes", "placed", "namespaces", "incoming", "expected"), interpod_cases.FILTER_CASES)
def test_inter_pod_affinity(
    nodes: list[Node], placed: list[Json], namespaces: Mapping[str, Mapping[str, str]], incoming: Json, expected: dict
) -> None:
    assert reasons(session_of(cache_of(nodes, placed, namespaces)), incoming) == expected


SPREAD_ONLY = {"predicate.NodeAffinityEnable": False, "predicate.TaintTolerationEnable": False}


@pytest.mark.parametrize(("nodes", "placed", "incoming", "expected"), spread_cases.FILTER_CASES)
def test_topology_spread(nodes: list[Node], placed: list[Json], incoming: Json, expected: dict) -> None:
    """As upstream, with the node affinity and taint filters off so that only spread decides."""
    assert reasons(session_of(cache_of(nodes, placed), SPREAD_ONLY), incoming) == expected


def test_topology_spread_behind_node_affinity() -> None:
    """With the node filters on, a node they reject says why before spread is asked."""
    nodes, placed, incoming, _ = spread_cases.FILTER_CASES[17].values  # nodeSelector foo="", Honor
    got = reasons(session_of(cache_of(nodes, placed)), incoming)
    assert got == {
        "node-a": spread_cases.SKEW,
        "node-b": spread_cases.SKEW,
        "node-y": node_cases.AFFINITY,
    }


@pytest.mark.parametrize(("manifest", "labels", "name", "fit"), node_cases.NODE_AFFINITY_CASES)
def test_node_affinity(manifest: Json, labels: dict[str, str], name: str, fit: bool) -> None:
    got = reasons(session_of(cache_of([labelled(name, labels)])), manifest)
    assert got == ({} if fit else {name: node_cases.AFFINITY})


@pytest.mark.parametrize(("tolerations", "taints", "fits"), node_cases.TAINT_FILTER_CASES)
def test_taints(tolerations: list[Json], taints: list[tuple[str, str, str]], fits: bool) -> None:
    got = reasons(session_of(cache_of([node("n1", taints=taints)])), pod(tolerations=tolerations))
    assert got == ({} if fits else {"n1": node_cases.TAINT})


@pytest.mark.parametrize(("wanted", "held", "fits"), node_cases.PORT_CASES)
def test_host_ports(wanted: list[tuple[str, str, int]], held: list[tuple[str, str, int]], fits: bool) -> None:
    cache = cache_of([node("m1")], [pod("held", node="m1", ports=held)])
    assert reasons(session_of(cache), pod(ports=wanted)) == ({} if fits else {"m1": node_cases.PORTS})


def test_host_ports_held_by_a_pod_placed_in_the_session() -> None:
    ssn = session_of(cache_of([node("m1"), node("m2")]))
    from scheduler.plugins.kube_harness import plugin, task_of

    first = task_of(pod("first", ports=[("TCP", "", 8080)]))
    first.node = "m1"  # type: ignore[assignment]
    plugin(ssn, predicates.Predicates).kube.session(ssn).placed(first)
    assert reasons(ssn, pod("second", ports=[("TCP", "", 8080)])) == {"m1": node_cases.PORTS}


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [
        pytest.param("", {}, id="no node name"),
        pytest.param("n1", {"n2": node_cases.NODE_NAME}, id="the first node"),
        pytest.param("n3", {"n1": node_cases.NODE_NAME, "n2": node_cases.NODE_NAME}, id="a node that is not there"),
    ],
)
def test_node_name(node_name: str, expected: dict[str, str]) -> None:
    manifest = pod()
    if node_name:
        manifest["spec"]["nodeName"] = node_name
    assert reasons(session_of(cache_of([node("n1"), node("n2")])), manifest) == expected


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], {"n1": node_cases.UNSCHEDULABLE}, id="cordoned"),
        pytest.param(
            [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
            {},
            id="tolerated",
        ),
    ],
)
def test_cordoned_nodes(tolerations: list[Json], expected: dict[str, str]) -> None:
    cache = cache_of([node("n1")], unschedulable=["n1"])
    assert reasons(session_of(cache), pod(tolerations=tolerations)) == expected


def test_a_pod_whose_terms_do_not_parse_fits_nowhere_and_says_why() -> None:
    bad = pod(anti=[{"labelSelector": {"matchLabels": {"app": "not a value"}}, "topologyKey": "zone"}])
    got = reasons(session_of(cache_of([node("n1"), node("n2")])), bad)
    assert set(got) == {"n1", "n2"}
    assert got["n1"].startswith("parsing pod: anti-affinity terms:")


def test_switched_off_filters_let_every_node_pass() -> None:
    off = {
        f"predicate.{k}": False
        for k in ("NodeAffinityEnable", "TaintTolerationEnable", "NodePortsEnable", "PodAffinityEnable")
    }
    cache = cache_of(
        [Node("n1", {"zone": "a"}, (("dedicated", "x", "NoSchedule"),))],
        [pod("held", node="n1", labels={"app": "a"}, ports=[("TCP", "", 80)])],
    )
    incoming = pod(
        node_selector={"zone": "b"},
        ports=[("TCP", "", 80)],
        anti=[{"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}],
    )
    assert reasons(session_of(cache, off), incoming) == {}
    assert reasons(session_of(cache), incoming) == {"n1": node_cases.TAINT}


def test_proportional_keeps_cpu_for_idle_devices() -> None:
    args = {
        "predicate.ProportionalEnable": True,
        "predicate.resources": "example.com/dev",
        "predicate.resources.example.com/dev.cpu": 8,
    }
    cache = cache_of([node("n1")])
    cache.ledger.table.scalar_free["example.com/dev"] = cache.ledger.table.cpu_free * 0 + 4  # 4 idle devices
    small, large = pod("small"), pod("large")
    small["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "30"}}
    large["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "40"}}
    ssn = session_of(cache, args)
    assert reasons(ssn, small) == {}  # 64 - 30 >= 4 x 8
    assert reasons(ssn, large) == {"n1": "proportional of resource example.com/dev check failed"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param({"predicate.VolumeZoneEnable": True}, "VolumeZoneEnable: true is not supported", id="volumes"),
        pytest.param({"predicate.GPUSharingEnable": "true"}, "gpushare", id="volcano gpu sharing"),
        pytest.param({"predicate.Bogus": True}, "unknown argument 'predicate.Bogus'", id="unknown"),
        pytest.param({"predicate.NodePortsEnable": "maybe"}, "must be true or false", id="not a boolean"),
        pytest.param(
            {"predicate.resources.x.cpu": 1}, "'x' is not one of predicate.resources", id="rate for no resource"
        ),
        pytest.param(
            {"predicate.resources": "x", "predicate.resources.x.memory": -1},
            "must be a number >= 0",
            id="negative rate",
        ),
    ],
)
def test_refused_arguments_are_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        predicates.build(arguments, BuildContext())


def test_volcano_arguments_that_change_nothing_here_are_accepted() -> None:
    built = predicates.build(
        {"predicate.CacheEnable": True, "predicate.VolumeZoneEnable": False, "predicate.GPUSharingEnable": False},
        BuildContext(),
    )
    assert built.args.node_ports
    assert built.args.pod_affinity
