"""Pod topology spread tables: the facts of kube-scheduler's `podtopologyspread/filtering_test.go`
(TestSingleConstraint, TestMultipleConstraints) and `scoring_test.go` (TestPodTopologySpreadScore),
as our own data.

Filter cases: (id, nodes, placed pods, incoming pod, {node: reason} for the nodes that fail). As
upstream, the cases test this filter alone: a node another filter would reject (node affinity,
taints) may pass it. Score cases: (id, nodes, failed nodes, placed pods, incoming pod, expected
scores of `nodes`); failed nodes hold pods but are not scored.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kubesem.builders import (
    HOST,
    UNSCHEDULABLE_TAINT,
    Node,
    constraint,
    exists,
    expr,
    exprs,
    labelled,
    node,
    pod,
    required_node_terms,
    soft,
)

SKEW = "node(s) didn't match pod topology spread constraints"
LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
FOO, BAR = exists("foo"), exists("bar")
FOO_LABEL, BAR_LABEL = {"foo": ""}, {"foo": "", "bar": ""}


def zoned(*spec: tuple[str, str]) -> list[Node]:
    """Nodes (name, zone) labelled zone=<zone> and node=<name>."""
    return [node(name, zone=zone, node=name) for name, zone in spec]


ABXY = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def placed(*spec: tuple[str, int], labels: dict[str, str] | None = None, ns: str = "default") -> list[Any]:
    """`count` pods labelled foo (or `labels`) on each named node."""
    return [
        pod(f"p-{name}-{i}", node=name, ns=ns, labels=labels if labels is not None else FOO_LABEL)
        for name, count in spec
        for i in range(count)
    ]


def zone_pod(*constraints: Any, labels: dict[str, str] | None = None, **kwargs: Any) -> Any:
    return pod(labels=labels if labels is not None else FOO_LABEL, spread=list(constraints), **kwargs)


def _f(case_id: str, nodes: list[Node], pods: list[Any], incoming: Any, fails: dict[str, str]) -> Any:
    return pytest.param(nodes, pods, incoming, fails, id=case_id)


NODE_2103 = placed(("node-a", 2), ("node-b", 1), ("node-y", 3))
FOO_NODES = [
    node("node-a", node="node-a", foo=""),
    node("node-b", node="node-b", foo=""),
    node("node-x", node="node-x", foo=""),
    node("node-y", node="node-y"),
]
FOO_PODS = placed(("node-a", 1), ("node-b", 1), ("node-y", 1))

FILTER_CASES = [
    _f("no placed pods", ABXY, [], zone_pod(constraint(1, "zone", FOO)), {}),
    _f("no placed pods, the pod does not match itself", ABXY, [], zone_pod(constraint(1, "zone", BAR)), {}),
    _f(
        "pods of another namespace do not count",
        ABXY,
        placed(("node-a", 1), ns="ns1") + placed(("node-a", 1), ns="ns2") + placed(("node-x", 1), ("node-y", 1)),
        zone_pod(constraint(1, "zone", FOO)),
        {"node-x": SKEW, "node-y": SKEW},
    ),
    _f(
        "a missing selector counts no pod",
        ABXY,
        placed(("node-x", 1), ("node-y", 1)),
        zone_pod(constraint(1, "zone", None)),
        {},
    ),
    _f("zones at 3/3: every node fits", ABXY, NODE_2103, zone_pod(constraint(1, "zone", FOO)), {}),
    _f(
        "zones at 1/2 as node-b lacks the zone label",
        [node("node-a", zone="zone1", node="node-a"), node("node-b", zon="zone1", node="node-b"), *ABXY[2:]],
        placed(("node-a", 1), ("node-b", 1), ("node-x", 1), ("node-y", 1)),
        zone_pod(constraint(1, "zone", FOO)),
        {"node-b": LABEL, "node-x": SKEW, "node-y": SKEW},
    ),
    _f(
        "no node has the rack label",
        zoned(("node-a", "zone1"), ("node-x", "zone2")),
        [],
        zone_pod(constraint(1, "rack", FOO)),
        {"node-a": LABEL, "node-x": LABEL},
    ),
    _f(
        "nodes at 2/1/0/3: only node-x fits",
        ABXY,
        NODE_2103,
        zone_pod(constraint(1, "node", FOO)),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    _f(
        "nodes at 2/1/0/3 with maxSkew 2: node-b and node-x fit",
        ABXY,
        NODE_2103,
        zone_pod(constraint(2, "node", FOO)),
        {"node-a": SKEW, "node-y": SKEW},
    ),
    _f(
        "nodes at 2/1/0/3, the pod does not match itself",
        ABXY,
        NODE_2103,
        zone_pod(constraint(1, "node", FOO), labels={"bar": ""}),
        {"node-a": SKEW, "node-y": SKEW},
    ),
    _f(
        "node affinity leaves node-b and node-x out of the domains: node-a fits",
        ABXY,
        NODE_2103,
        zone_pod(
            constraint(1, "node", FOO),
            node_affinity=required_node_terms(exprs(expr("node", "In", "node-a", "node-y"))),
        ),
        {"node-y": SKEW},
    ),
    _f(
        "terminating pods do not count",
        [node("node-a", node="node-a"), node("node-b", node="node-b")],
        [pod("p-a", node="node-a", labels=FOO_LABEL, terminating=True), pod("p-b", node="node-b", labels=FOO_LABEL)],
        zone_pod(constraint(1, "node", FOO)),
        {"node-b": SKEW},
    ),
    _f(
        "node affinity leaves node-b out: zones at 0/1, node-a fits",
        ABXY,
        placed(("node-b", 2), ("node-y", 1)),
        zone_pod(constraint(1, "zone", FOO), node_affinity=required_node_terms(exprs(expr("node", "NotIn", "node-b")))),
        {"node-x": SKEW, "node-y": SKEW},
    ),
    _f(
        "nodes at 2/2/1, fewer domains than minDomains: only the third fits",
        [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
        placed(("node-a", 2), ("node-b", 2), ("node-c", 1)),
        zone_pod(constraint(2, "node", FOO, min_domains=4)),
        {"node-a": SKEW, "node-b": SKEW},
    ),
    _f(
        "nodes at 2/2/1, more domains than minDomains: all fit",
        [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
        placed(("node-a", 2), ("node-b", 2), ("node-c", 1)),
        zone_pod(constraint(2, "node", FOO, min_domains=2)),
        {},
    ),
    _f(
        "zones at 2/1, fewer domains than minDomains: zone2 fits",
        ABXY,
        placed(("node-a", 1), ("node-b", 1), ("node-y", 1)),
        zone_pod(constraint(2, "zone", FOO, min_domains=3)),
        {"node-a": SKEW, "node-b": SKEW},
    ),
    _f(
        "zones at 2/1, more domains than minDomains: all fit",
        ABXY,
        placed(("node-a", 1), ("node-b", 1), ("node-y", 1)),
        zone_pod(constraint(2, "zone", FOO, min_domains=1)),
        {},
    ),
    _f(
        "nodeAffinityPolicy Honor with a nodeSelector: node-y is not a domain",
        FOO_NODES,
        FOO_PODS,
        zone_pod(constraint(1, "node", FOO), node_selector={"foo": ""}),
        {"node-a": SKEW, "node-b": SKEW},
    ),
    _f(
        "nodeAffinityPolicy Ignore with a nodeSelector: node-y counts",
        FOO_NODES,
        FOO_PODS,
        zone_pod(constraint(1, "node", FOO, affinity_policy="Ignore"), node_selector={"foo": ""}),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    _f(
        "nodeAffinityPolicy Honor with node affinity: node-y is not a domain",
        FOO_NODES,
        FOO_PODS,
        zone_pod(constraint(1, "node", FOO), node_affinity=required_node_terms(exprs(expr("foo", "In", "")))),
        {"node-a": SKEW, "node-b": SKEW},
    ),
    _f(
        "nodeAffinityPolicy Ignore with node affinity: node-y counts",
        FOO_NODES,
        FOO_PODS,
        zone_pod(
            constraint(1, "node", FOO, affinity_policy="Ignore"),
            node_affinity=required_node_terms(exprs(expr("foo", "In", ""))),
        ),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    _f(
        "nodeTaintsPolicy Honor: the tainted node-y is not a domain",
        [*FOO_NODES[:3], Node("node-y", {"node": "node-y"}, (UNSCHEDULABLE_TAINT,))],
        FOO_PODS,
        zone_pod(constraint(1, "node", FOO, taints_policy="Honor")),
        {"node-a": SKEW, "node-b": SKEW},
    ),
    _f(
        "nodeTaintsPolicy Ignore (default): the tainted node-y counts",
        [*FOO_NODES[:3], Node("node-y", {"node": "node-y"}, (UNSCHEDULABLE_TAINT,))],
        FOO_PODS,
        zone_pod(constraint(1, "node", FOO)),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    # TestMultipleConstraints
    _f(
        "zone and node, spreads 3/3 and 2/1/0/3: node-x",
        ABXY,
        NODE_2103,
        zone_pod(constraint(1, "zone", FOO), constraint(1, "node", FOO)),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    _f(
        "zone and node, spreads 3/4 and 2/1/0/4: no node",
        ABXY,
        placed(("node-a", 2), ("node-b", 1), ("node-y", 4)),
        zone_pod(constraint(1, "zone", FOO), constraint(1, "node", FOO)),
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
    _f(
        "different selectors, spreads 1/0 and 1/0/0/1: node-x",
        ABXY,
        [pod("a1", "node-a", labels=FOO_LABEL), pod("y1", "node-y", labels={"bar": ""})],
        zone_pod(constraint(1, "zone", FOO), constraint(1, "node", BAR), labels=BAR_LABEL),
        {"node-a": SKEW, "node-b": SKEW, "node-y": SKEW},
    ),
    _f(
        "different selectors, spreads 1/0 and 0/0/1/1: no node",
        ABXY,
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("x1", "node-x", labels={"bar": ""}),
            pod("y1", "node-y", labels={"bar": ""}),
        ],
        zone_pod(constraint(1, "zone", FOO), constraint(1, "node", BAR), labels=BAR_LABEL),
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
    _f(
        "different selectors, spreads 2/3 and 1/0/0/1: node-b",
        ABXY,
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("a2", "node-a", labels=BAR_LABEL),
            pod("y1", "node-y", labels=FOO_LABEL),
            pod("y2", "node-y", labels=BAR_LABEL),
            pod("y3", "node-y", labels=FOO_LABEL),
        ],
        zone_pod(constraint(1, "zone", FOO), constraint(1, "node", BAR), labels=BAR_LABEL),
        {"node-a": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
]


# -- scores ----------------------------------------------------------------------------------------
def hosts(*names: str) -> list[Node]:
    return [labelled(name, {HOST: name}) for name in names]


def zone_hosts(*spec: tuple[str, str]) -> list[Node]:
    return [labelled(name, {"zone": zone, HOST: name}) for name, zone in spec]


def _s(case_id: str, nodes: list[Node], failed: list[Node], pods: list[Any], incoming: Any, want: list[int]) -> Any:
    return pytest.param(nodes, failed, pods, incoming, want, id=case_id)


HOST_1 = soft(1, HOST, FOO)
ABC3 = [node("node-a", node="node-a", foo=""), node("node-b", node="node-b", foo=""), node("node-c", node="node-c")]
ABC3_PODS = placed(("node-a", 2), ("node-b", 1), ("node-c", 1))
SCORE_CASES = [
    _s("one constraint on node, no pods", hosts("node-a", "node-b"), [], [], zone_pod(HOST_1), [100, 100]),
    _s(
        "one constraint on node, one candidate",
        hosts("node-a"),
        hosts("node-b"),
        placed(("node-a", 2), ("node-b", 1)),
        zone_pod(HOST_1),
        [100],
    ),
    _s(
        "one constraint on node, equal counts",
        hosts("node-a", "node-b"),
        [],
        placed(("node-a", 1), ("node-b", 1)),
        zone_pod(HOST_1),
        [100, 100],
    ),
    _s(
        "one constraint on node, 2/1/0/3",
        hosts("node-a", "node-b", "node-c", "node-d"),
        [],
        placed(("node-a", 2), ("node-b", 1), ("node-d", 3)),
        zone_pod(HOST_1),
        [20, 60, 100, 0],
    ),
    _s(
        "one constraint on node, a missing selector",
        hosts("node-a", "node-b", "node-c", "node-d"),
        [],
        placed(("node-a", 2), ("node-b", 1), ("node-d", 3)),
        zone_pod(soft(1, HOST, None)),
        [100, 100, 100, 100],
    ),
    _s(
        "one constraint on node, 2/1/0/3, maxSkew 2",
        hosts("node-a", "node-b", "node-c", "node-d"),
        [],
        placed(("node-a", 2), ("node-b", 1), ("node-d", 3)),
        zone_pod(soft(2, HOST, FOO)),
        [33, 66, 100, 16],
    ),
    _s(
        "one constraint on node, 4/3/2/1, maxSkew 3",
        hosts("node-a", "node-b", "node-c", "node-d"),
        [],
        placed(("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)),
        zone_pod(soft(3, HOST, FOO)),
        [44, 66, 77, 100],
    ),
    _s(
        "one constraint on node, 3 of 4 nodes are candidates",
        hosts("node-a", "node-b", "node-x"),
        hosts("node-y"),
        placed(("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)),
        zone_pod(HOST_1),
        [33, 83, 100],
    ),
    _s(
        "one constraint on node, a candidate without the topology key",
        [*hosts("node-a"), node("node-b", n="node-b"), *hosts("node-x")],
        hosts("node-y"),
        placed(("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)),
        zone_pod(HOST_1),
        [16, 0, 100],
    ),
    _s(
        "one constraint on zone, 3 of 4 nodes are candidates",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")),
        zone_hosts(("node-y", "zone2")),
        placed(("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)),
        zone_pod(soft(1, "zone", FOO)),
        [75, 75, 100],
    ),
    _s(
        "zone and node, 2 of 4 nodes are candidates",
        zone_hosts(("node-a", "zone1"), ("node-x", "zone2")),
        zone_hosts(("node-b", "zone1"), ("node-y", "zone2")),
        placed(("node-a", 2), ("node-b", 1), ("node-x", 2), ("node-y", 4)),
        zone_pod(soft(1, "zone", FOO), HOST_1),
        [100, 63],
    ),
    _s(
        "zone and node with different selectors",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")),
        [],
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("b1", "node-b", labels=BAR_LABEL),
            pod("y1", "node-y", labels=FOO_LABEL),
            pod("y2", "node-y", labels={"bar": ""}),
        ],
        zone_pod(soft(1, "zone", FOO), soft(1, HOST, BAR), labels=BAR_LABEL),
        [60, 20, 100, 60],
    ),
    _s(
        "zone and node with different selectors, some nodes without pods",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")),
        [],
        [
            pod("b1", "node-b", labels={"bar": ""}),
            pod("x1", "node-x", labels=FOO_LABEL),
            pod("y1", "node-y", labels=BAR_LABEL),
        ],
        zone_pod(soft(1, "zone", FOO), soft(1, HOST, BAR), labels=BAR_LABEL),
        [100, 60, 40, 0],
    ),
    _s(
        "zone and node with different selectors, 3 of 4 nodes are candidates",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")),
        zone_hosts(("node-y", "zone2")),
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("b1", "node-b", labels=BAR_LABEL),
            pod("y1", "node-y", labels=FOO_LABEL),
            pod("y2", "node-y", labels={"bar": ""}),
        ],
        zone_pod(soft(1, "zone", FOO), soft(1, HOST, BAR), labels=BAR_LABEL),
        [50, 25, 100],
    ),
    _s(
        "pods of another namespace do not count",
        hosts("node-a", "node-b"),
        [],
        placed(("node-a", 1), ns="ns1") + placed(("node-a", 1), ("node-b", 2)),
        zone_pod(HOST_1),
        [100, 33],
    ),
    _s(
        "terminating pods do not count",
        hosts("node-a", "node-b"),
        [],
        [pod("p-a", "node-a", labels=FOO_LABEL, terminating=True), pod("p-b", "node-b", labels=FOO_LABEL)],
        zone_pod(HOST_1),
        [100, 0],
    ),
    _s(
        "minDomains has no effect on scores",
        [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
        [],
        placed(("node-a", 2), ("node-b", 2), ("node-c", 1)),
        zone_pod(soft(2, "node", FOO, min_domains=10)),
        [75, 75, 100],
    ),
    _s(
        "nodeAffinityPolicy Honor with a nodeSelector",
        ABC3,
        [],
        ABC3_PODS,
        zone_pod(soft(1, "node", FOO), node_selector={"foo": ""}),
        [0, 33, 100],
    ),
    _s(
        "nodeAffinityPolicy Ignore with a nodeSelector",
        ABC3,
        [],
        ABC3_PODS,
        zone_pod(soft(1, "node", FOO, affinity_policy="Ignore"), node_selector={"foo": ""}),
        [66, 100, 100],
    ),
    _s(
        "nodeAffinityPolicy Honor with node affinity",
        ABC3,
        [],
        ABC3_PODS,
        zone_pod(soft(1, "node", FOO), node_affinity=required_node_terms(exprs(expr("foo", "In", "")))),
        [0, 33, 100],
    ),
    _s(
        "nodeAffinityPolicy Ignore with node affinity",
        ABC3,
        [],
        ABC3_PODS,
        zone_pod(
            soft(1, "node", FOO, affinity_policy="Ignore"),
            node_affinity=required_node_terms(exprs(expr("foo", "In", ""))),
        ),
        [66, 100, 100],
    ),
    _s(
        "nodeTaintsPolicy Honor",
        [
            node("node-a", node="node-a"),
            node("node-b", node="node-b"),
            Node("node-c", {"node": "node-c"}, (UNSCHEDULABLE_TAINT,)),
        ],
        [],
        ABC3_PODS,
        zone_pod(soft(1, "node", FOO, taints_policy="Honor")),
        [0, 33, 100],
    ),
    _s(
        "nodeTaintsPolicy Ignore",
        [
            node("node-a", node="node-a"),
            node("node-b", node="node-b"),
            Node("node-c", {"node": "node-c"}, (UNSCHEDULABLE_TAINT,)),
        ],
        [],
        ABC3_PODS,
        zone_pod(soft(1, "node", FOO)),
        [66, 100, 100],
    ),
    _s(
        "matchLabelKeys ANDed with an empty selector",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")),
        [],
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("b1", "node-b", labels=BAR_LABEL),
            pod("c1", "node-c", labels=FOO_LABEL),
            pod("c2", "node-c", labels={"bar": ""}),
        ],
        zone_pod(
            soft(1, "zone", {}, match_label_keys=["foo"]), soft(1, HOST, {}, match_label_keys=["bar"]), labels=BAR_LABEL
        ),
        [60, 20, 60, 100],
    ),
    _s(
        "matchLabelKeys ANDed with a selector",
        zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")),
        [],
        [
            pod("a1", "node-a", labels=FOO_LABEL),
            pod("b1", "node-b", labels={"foo": "", "bar": "", "baz": ""}),
            pod("c1", "node-c", labels=FOO_LABEL),
            pod("c2", "node-c", labels={"bar": ""}),
            pod("c3", "node-c", labels={"bar": "", "baz": ""}),
        ],
        zone_pod(
            soft(1, "zone", FOO), soft(1, HOST, BAR, match_label_keys=["baz"]), labels={"foo": "", "bar": "", "baz": ""}
        ),
        [60, 20, 60, 100],
    ),
]
