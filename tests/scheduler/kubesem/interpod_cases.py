"""Inter-pod affinity tables: the facts of kube-scheduler's `interpodaffinity/filtering_test.go`
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes) and `scoring_test.go`
(TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight), as our own data.

Filter cases: (id, nodes, placed pods, namespaces, incoming pod, {node: reason} for the nodes that fail).
Score cases: (id, nodes, placed pods, incoming pod, expected score per node, hardPodAffinityWeight).
The upstream tables use the empty namespace; here it is `default`.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kubesem.builders import (
    Node,
    exists,
    expr,
    exprs,
    is_in,
    node,
    not_in,
    pod,
    term,
    weighted,
)

AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXIST = "node(s) didn't satisfy existing pods anti-affinity rules"

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
TEAM1 = is_in("team", "team1")

# -- one node: region r1, zone z11 ------------------------------------------------------------
N1 = [node("node1", region="r1", zone="z11")]
SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
SCAN_POD = pod("scan", node="node1", labels=SCAN)
SCAN_IN = is_in("service", "securityscan", "value2")


def _single(case_id: str, incoming: dict[str, Any], placed: list[Any], fails: dict[str, str]) -> Any:
    return pytest.param(N1, placed, NAMESPACES, incoming, fails, id=case_id)


SINGLE_NODE = [
    _single("no required affinity, no pods", pod(), [], {}),
    _single("affinity In matches the placed pod", pod(labels=S1, affinity=[term(SCAN_IN, "region")]), [SCAN_POD], {}),
    _single(
        "affinity NotIn matches the placed pod",
        pod(labels=S1, affinity=[term(not_in("service", "securityscan3", "value3"), "region")]),
        [SCAN_POD],
        {},
    ),
    _single(
        "affinity in another namespace does not match",
        pod(labels=S1, affinity=[term(SCAN_IN, "", namespaces=["DiffNameSpace"])]),
        [pod("scan", node="node1", ns="ns", labels=SCAN)],
        {"node1": AFF},
    ),
    _single(
        "affinity selector not matching the placed pod",
        pod(labels=SCAN, affinity=[term(is_in("service", "antivirusscan", "value2"), "")]),
        [SCAN_POD],
        {"node1": AFF},
    ),
    _single(
        "several terms with different operators all match",
        pod(
            labels=S1,
            affinity=[
                term(exprs(expr("service", "Exists"), expr("wrongkey", "DoesNotExist")), "region"),
                term(exprs(expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue")), "region"),
            ],
        ),
        [SCAN_POD],
        {},
    ),
    _single(
        "requirements are ANDed: one does not match",
        pod(
            labels=S1,
            affinity=[
                term(exprs(expr("service", "Exists"), expr("wrongkey", "DoesNotExist")), "region"),
                term(exprs(expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue")), "region"),
            ],
        ),
        [SCAN_POD],
        {"node1": AFF},
    ),
    _single(
        "affinity and anti-affinity both satisfied",
        pod(
            labels=S1,
            affinity=[term(SCAN_IN, "region")],
            anti=[term(is_in("service", "antivirusscan", "value2"), "node")],
        ),
        [SCAN_POD],
        {},
    ),
    _single(
        "affinity, anti-affinity and the placed pod's anti-affinity satisfied",
        pod(
            labels=S1,
            affinity=[term(SCAN_IN, "region")],
            anti=[term(is_in("service", "antivirusscan", "value2"), "node")],
        ),
        [pod("scan", node="node1", labels=SCAN, anti=[term(is_in("service", "antivirusscan", "value2"), "node")])],
        {},
    ),
    _single(
        "affinity satisfied, anti-affinity not",
        pod(labels=S1, affinity=[term(SCAN_IN, "region")], anti=[term(SCAN_IN, "zone")]),
        [SCAN_POD],
        {"node1": ANTI},
    ),
    _single(
        "the placed pod's anti-affinity rejects the pod",
        pod(
            labels=SCAN,
            affinity=[term(SCAN_IN, "region")],
            anti=[term(is_in("service", "antivirusscan", "value2"), "node")],
        ),
        [pod("scan", node="node1", labels=SCAN, anti=[term(SCAN_IN, "zone")])],
        {"node1": EXIST},
    ),
    _single(
        "a pod not matching its own affinity is not the first of a group",
        pod(labels=SCAN, affinity=[term(not_in("service", "securityscan", "value2"), "region")]),
        [pod("scan", node="node2", labels={"service": "securityscan"})],
        {"node1": AFF},
    ),
    _single(
        "a placed pod's anti-affinity applies to a pod without affinity",
        pod(labels=SCAN),
        [pod("scan", node="node1", labels=SCAN, anti=[term(SCAN_IN, "zone")])],
        {"node1": EXIST},
    ),
    _single(
        "a placed pod's anti-affinity that does not select the pod",
        pod(labels=SCAN),
        [pod("scan", node="node1", labels=SCAN, anti=[term(not_in("service", "securityscan", "value2"), "zone")])],
        {},
    ),
    _single(
        "the pod's anti-affinity rejects, the placed pod's would not",
        pod(labels=SCAN, anti=[term(exists("service"), "region"), term(exists("security"), "region")]),
        [pod("s1", node="node1", labels=S1, anti=[term(exists("security"), "zone")])],
        {"node1": ANTI},
    ),
    _single(
        "symmetry a1: the pod's anti-affinity matches part of the placed pod",
        pod(labels=SCAN, anti=[term(exists("service"), "zone"), term(exists("security"), "zone")]),
        [pod("s1", node="node1", labels=S1, anti=[term(exists("security"), "zone")])],
        {"node1": ANTI},
    ),
    _single(
        "symmetry a2: the placed pod's anti-affinity matches part of the pod",
        pod(labels=S1, anti=[term(exists("security"), "zone")]),
        [
            pod(
                "scan",
                node="node1",
                labels=SCAN,
                anti=[term(exists("service"), "zone"), term(exists("security"), "zone")],
            )
        ],
        {"node1": EXIST},
    ),
    _single(
        "symmetry b1",
        pod(labels={"abc": "", "xyz": ""}, anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
        [
            pod(
                "q",
                node="node1",
                labels={"def": "", "xyz": ""},
                anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")],
            )
        ],
        {"node1": ANTI},
    ),
    _single(
        "symmetry b2",
        pod(labels={"def": "", "xyz": ""}, anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
        [
            pod(
                "q",
                node="node1",
                labels={"abc": "", "xyz": ""},
                anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")],
            )
        ],
        {"node1": ANTI},
    ),
    _single(
        "affinity with a namespaceSelector selecting the placed pod's namespace",
        pod(labels=S1, affinity=[term(SCAN_IN, "region", ns_selector=TEAM1)]),
        [pod("scan", node="node1", ns="subteam1.team1", labels=SCAN)],
        {},
    ),
    _single(
        "affinity with a namespaceSelector not selecting it",
        pod(labels=S1, affinity=[term(SCAN_IN, "region", ns_selector=TEAM1)]),
        [pod("scan", node="node1", ns="subteam1.team2", labels=SCAN)],
        {"node1": AFF},
    ),
    _single(
        "anti-affinity with a namespaceSelector selecting the placed pod's namespace",
        pod(ns="subteam1.team1", labels=S1, anti=[term(SCAN_IN, "zone", ns_selector=TEAM1)]),
        [pod("scan", node="node1", ns="subteam2.team1", labels=SCAN)],
        {"node1": ANTI},
    ),
    _single(
        "anti-affinity with an empty namespaceSelector selects every namespace",
        pod(ns="subteam1.team1", labels=S1, anti=[term(SCAN_IN, "zone", ns_selector={})]),
        [pod("scan", node="node1", ns="subteam2.team1", labels=SCAN)],
        {"node1": ANTI},
    ),
    _single(
        "anti-affinity with a namespaceSelector not selecting it",
        pod(ns="subteam1.team1", labels=S1, anti=[term(SCAN_IN, "zone", ns_selector=TEAM1)]),
        [pod("scan", node="node1", ns="subteam1.team2", labels=SCAN)],
        {},
    ),
]

# -- several nodes -------------------------------------------------------------------------------
CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def _n(name: str, **labels: str) -> Node:
    return node(name, **labels)


def _r1(zone_a: str = "z1", zone_b: str = "z2", zone_c: str | None = None) -> list[Node]:
    nodes = [
        _n("nodeA", region="r1", zone=zone_a, hostname="nodeA"),
        _n("nodeB", region="r1", zone=zone_b, hostname="nodeB"),
    ]
    if zone_c:
        nodes.append(_n("nodeC", region="r1", zone=zone_c, hostname="nodeC"))
    return nodes


def _multi(case_id: str, nodes: list[Node], placed: list[Any], incoming: Any, fails: dict[str, str]) -> Any:
    return pytest.param(nodes, placed, {"NS1": {}}, incoming, fails, id=case_id)


CHINA3 = [_n("node1", **CHINA), _n("node2", **CHINA_AZ1), _n("node3", **INDIA)]
ABC = [_n("nodeA", **CHINA), _n("nodeB", **CHINA_AZ1), _n("nodeC", **INDIA)]

MULTI_NODE = [
    _multi(
        "nodes sharing the domain of a matching pod all fit",
        CHINA3,
        [pod("p1", node="node1", labels={"foo": "bar"})],
        pod(affinity=[term(is_in("foo", "bar"), "region")]),
        {"node3": AFF},
    ),
    _multi(
        "the first pod of a group with affinity to itself may go anywhere",
        [_n("nodeA", zone="az1", hostname="h1"), _n("nodeB", zone="az2", hostname="h2")],
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term(is_in("foo", "bar"), "zone"), term(is_in("service", "securityscan"), "zone")],
        ),
        {},
    ),
    _multi(
        "the first pod of a group only goes to nodes with the topology keys",
        [_n("nodeA", zoneLabel="az1", hostname="h1"), _n("nodeB", zoneLabel="az2", hostname="h2")],
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[term(is_in("foo", "bar"), "zone"), term(is_in("service", "securityscan"), "zone")],
        ),
        {"nodeA": AFF, "nodeB": AFF},
    ),
    _multi(
        "anti-affinity rejects every node of the matching pod's region",
        [_n("nodeA", region="r1", hostname="nodeA"), _n("nodeB", region="r1", hostname="nodeB")],
        [pod("p", node="nodeA", labels={"foo": "abc"})],
        pod(anti=[term(is_in("foo", "abc"), "region")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "anti-affinity rejects when any of its terms matches",
        _r1(),
        [pod("p", node="nodeA", labels={"foo": "abc", "service": "securityscan"})],
        pod(anti=[term(is_in("foo", "abc"), "region"), term(is_in("service", "securityscan"), "zone")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "anti-affinity: the other region fits",
        ABC,
        [pod("p", node="nodeA", labels={"foo": "abc"})],
        pod(anti=[term(is_in("foo", "abc"), "region")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "anti-affinity: a pod of another namespace in the other region does not count",
        ABC,
        [
            pod("a", node="nodeA", ns="NS1", labels={"foo": "bar"}),
            pod("c", node="nodeC", ns="NS2", anti=[term(is_in("foo", "123"), "region")]),
        ],
        pod(ns="NS1", labels={"foo": "123"}, anti=[term(is_in("foo", "bar"), "region")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "a placed pod's term whose topology key no node has rejects nothing",
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
        [pod("a", node="nodeA", anti=[term(exists("foo"), "invalid-node-label")])],
        pod(labels={"foo": ""}),
        {},
    ),
    _multi(
        "the pod's anti-affinity needs the topology key as well as the selector",
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
        [pod("a", node="nodeA", labels={"foo": ""})],
        pod(anti=[term(exists("foo"), "invalid-node-label")]),
        {},
    ),
    _multi(
        "every node violates some placed pod's anti-affinity",
        _r1("z1", "z2"),
        [
            pod("a", node="nodeA", anti=[term(exists("foo"), "zone")]),
            pod("b", node="nodeA", anti=[term(exists("bar"), "region")]),
        ],
        pod(labels={"foo": "", "bar": ""}),
        {"nodeA": EXIST, "nodeB": EXIST},
    ),
    _multi(
        "every node violates one of the pod's anti-affinity terms",
        _r1("z1", "z2"),
        [pod("a", node="nodeA", labels={"foo": ""}), pod("b", node="nodeB", labels={"bar": ""})],
        pod(anti=[term(exists("foo"), "zone"), term(exists("bar"), "region")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "a placed pod's terms count when selector and key both match (one key missing)",
        _r1("z1", "z2"),
        [pod("a", node="nodeA", anti=[term(exists("foo"), "invalid-node-label"), term(exists("bar"), "zone")])],
        pod(labels={"foo": "", "bar": ""}),
        {"nodeA": EXIST},
    ),
    _multi(
        "the pod's terms count when selector and key both match (one key missing)",
        _r1("z1", "z2"),
        [pod("a", node="nodeA", labels={"foo": "", "bar": ""})],
        pod(anti=[term(exists("foo"), "invalid-node-label"), term(exists("bar"), "zone")]),
        {"nodeA": ANTI},
    ),
    _multi(
        "a placed pod's terms count when selector and key both match",
        _r1("z1", "z2"),
        [pod("a", node="nodeA", anti=[term(exists("foo"), "region"), term(exists("bar"), "zone")])],
        pod(labels={"foo": "", "bar": ""}),
        {"nodeA": EXIST, "nodeB": EXIST},
    ),
    _multi(
        "the pod's terms count when selector and key both match",
        _r1("z1", "z2"),
        [pod("a", node="nodeA", labels={"foo": "", "bar": ""})],
        pod(anti=[term(exists("foo"), "region"), term(exists("bar"), "zone")]),
        {"nodeA": ANTI, "nodeB": ANTI},
    ),
    _multi(
        "placed pods on two nodes each select the pod: only the third fits",
        _r1("z1", "z2", "z3"),
        [
            pod("a", node="nodeA", anti=[term(exists("foo"), "zone"), term(exists("labelA"), "zone")]),
            pod("b", node="nodeB", anti=[term(exists("bar"), "zone"), term(exists("labelB"), "zone")]),
        ],
        pod(labels={"foo": "", "bar": ""}),
        {"nodeA": EXIST, "nodeB": EXIST},
    ),
    _multi(
        "affinity: all terms match one pod, then every key is checked",
        _r1("z1", "z1"),
        [pod("pod1", node="nodeA", labels={"foo": "", "bar": ""})],
        pod(affinity=[term(exists("foo"), "region"), term(exists("bar"), "zone")]),
        {},
    ),
    _multi(
        "affinity: the terms must match the same pod",
        _r1("z1", "z2"),
        [pod("pod1", node="nodeA", labels={"foo": ""}), pod("pod2", node="nodeB", labels={"bar": ""})],
        pod(affinity=[term(exists("foo"), "region"), term(exists("bar"), "zone")]),
        {"nodeA": AFF, "nodeB": AFF},
    ),
]

FILTER_CASES = SINGLE_NODE + MULTI_NODE

# -- scores ----------------------------------------------------------------------------------------
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
S2 = {"security": "S2"}


def _pref(weight: int, selector: Any, key: str, **kwargs: Any) -> Any:
    return weighted(weight, term(selector, key, **kwargs))


STAY_S1_REGION = [_pref(5, is_in("security", "S1"), "region")]
STAY_S2_REGION = [_pref(6, is_in("security", "S2"), "region")]
AFFINITY3 = [
    _pref(8, exprs(expr("security", "NotIn", "S1"), expr("security", "In", "S2")), "region"),
    _pref(2, exprs(expr("security", "Exists"), expr("wrongkey", "DoesNotExist")), "region"),
]
HARD = [
    term(is_in("security", "S1", "value2"), "region"),
    term(exprs(expr("security", "Exists"), expr("wrongkey", "DoesNotExist")), "region"),
]
AWAY_S1_AZ = [_pref(5, is_in("security", "S1"), "az")]
AWAY_S2_AZ = [_pref(5, is_in("security", "S2"), "az")]
NS_SELECTED = [_pref(5, is_in("security", "S1"), "region", namespaces=["subteam2.team2"], ns_selector=TEAM1)]


def _mixed(name: str = "p", **kwargs: Any) -> Any:
    """A pod preferring S1 pods in its region (8) and no S2 pod in its zone (5)."""
    return pod(name, preferred=[_pref(8, is_in("security", "S1"), "region")], preferred_anti=AWAY_S2_AZ, **kwargs)


def _nodes(*labels: dict[str, str]) -> list[Node]:
    return [node(f"node{i + 1}", **lab) for i, lab in enumerate(labels)]


def _score(case_id: str, nodes: list[Node], placed: list[Any], incoming: Any, want: list[int], hard: int = 1) -> Any:
    return pytest.param(nodes, placed, incoming, want, hard, id=case_id)


THREE = _nodes(CHINA, INDIA, AZ1)
SCORE_CASES = [
    _score("nothing preferred: all the same", THREE, [], pod(labels=S1), [0, 0, 0]),
    _score(
        "affinity: the matching pod's domain scores high",
        THREE,
        [pod("a", "node1", labels=S1), pod("b", "node2", labels=S2), pod("c", "node3", labels=S1)],
        pod(labels=S1, preferred=STAY_S1_REGION),
        [100, 0, 0],
    ),
    _score(
        "affinity: every node of the matching pod's region scores the same",
        _nodes(CHINA, CHINA_AZ1, INDIA),
        [pod("a", "node1", labels=S1)],
        pod(preferred=STAY_S1_REGION),
        [100, 100, 0],
    ),
    _score(
        "affinity: the region with more matching pods scores high",
        _nodes(CHINA, INDIA, CHINA, CHINA, INDIA),
        [pod(f"p{i}", n, labels=S2) for i, n in enumerate(["node1", "node1", "node2", "node3", "node4", "node5"])],
        pod(labels=S1, preferred=STAY_S2_REGION),
        [100, 0, 100, 100, 0],
    ),
    _score(
        "affinity: different operators, some terms do not match",
        THREE,
        [pod("a", "node1", labels=S1), pod("b", "node2", labels=S2), pod("c", "node3", labels=S1)],
        pod(labels=S1, preferred=AFFINITY3),
        [20, 100, 0],
    ),
    _score(
        "symmetry: placed pods' preferred affinity",
        THREE,
        [
            pod("a", "node1", labels=S1, preferred=STAY_S1_REGION),
            pod("b", "node2", labels=S2, preferred=STAY_S2_REGION),
        ],
        pod(labels=S2),
        [0, 100, 0],
    ),
    _score(
        "symmetry with a namespaceSelector",
        THREE,
        [pod("a", "node1", labels=S1, preferred=NS_SELECTED), pod("b", "node2", labels=S2, preferred=STAY_S2_REGION)],
        pod(ns="subteam1.team1", labels=S1),
        [100, 0, 0],
    ),
    _score(
        "anti-affinity symmetry with a namespaceSelector",
        THREE,
        [
            pod("a", "node1", labels=S1, preferred_anti=NS_SELECTED),
            pod("b", "node2", labels=S2, preferred=STAY_S2_REGION),
        ],
        pod(ns="subteam1.team1", labels=S1),
        [0, 100, 100],
    ),
    _score(
        "symmetry: placed pods' required affinity counts with hardPodAffinityWeight",
        THREE,
        [pod("a", "node1", labels=S1, affinity=HARD), pod("b", "node2", labels=S2, affinity=HARD)],
        pod(labels=S1),
        [100, 100, 0],
    ),
    _score(
        "anti-affinity: the node without a matching pod scores high",
        _nodes(AZ1, CHINA),
        [pod("a", "node1", labels=S1), pod("b", "node2", labels=S2)],
        pod(labels=S1, preferred_anti=AWAY_S1_AZ),
        [0, 100],
    ),
    _score(
        "anti-affinity: the node without the topology key scores high",
        _nodes(AZ1, CHINA),
        [pod("a", "node1", labels=S1), pod("b", "node2", labels=S1)],
        pod(labels=S1, preferred_anti=AWAY_S1_AZ),
        [0, 100],
    ),
    _score(
        "anti-affinity: the node with more matching pods scores low",
        _nodes(AZ1, INDIA),
        [pod("a", "node1", labels=S1), pod("b", "node1", labels=S1), pod("c", "node2", labels=S2)],
        pod(labels=S1, preferred_anti=AWAY_S1_AZ),
        [0, 100],
    ),
    _score(
        "anti-affinity symmetry",
        _nodes(AZ1, AZ2),
        [
            pod("a", "node1", labels=S1, preferred_anti=AWAY_S2_AZ),
            pod("b", "node2", labels=S2, preferred_anti=AWAY_S1_AZ),
        ],
        pod(labels=S2),
        [0, 100],
    ),
    _score(
        "affinity and anti-affinity",
        _nodes(CHINA, AZ1),
        [pod("a", "node1", labels=S1), pod("b", "node2", labels=S1)],
        _mixed(labels=S1),
        [100, 0],
    ),
    _score(
        "affinity and anti-affinity with pods alike",
        _nodes(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA),
        [
            pod(f"p{i}", n, labels=S1)
            for i, n in enumerate(["node1", "node1", "node2", "node3", "node3", "node4", "node5"])
        ],
        _mixed(labels=S1),
        [100, 0, 100, 100, 0],
    ),
    _score(
        "affinity, anti-affinity and symmetry",
        _nodes(CHINA, AZ1, INDIA, AZ2),
        [
            pod("a", "node1", labels=S1),
            pod("b", "node2", labels=S2),
            _mixed("c", node="node3"),
            pod("d", "node4", preferred_anti=AWAY_S1_AZ),
        ],
        _mixed(labels=S1),
        [100, 0, 100, 0],
    ),
    _score(
        "nodes of a topology where only some hold pods with affinity",
        _nodes(CHINA, CHINA),
        [pod("a", "node1", labels=S1), _mixed("b", node="node2")],
        pod(labels=S1),
        [0, 0],
    ),
    _score(
        "affinity to pods selected by a namespaceSelector",
        _nodes(CHINA, INDIA),
        [
            pod("a", "node1", ns="subteam1.team1", labels=S1),
            pod("b", "node1", ns="subteam1.team1", labels=S1),
            pod("c", "node1", ns="subteam1.team2", labels=S1),
            pod("d", "node2", ns="subteam2.team1", labels=S1),
        ],
        pod(ns="subteam1.team1", labels=S1, preferred=NS_SELECTED),
        [100, 0],
    ),
    _score(
        "affinity to pods selected by a namespaceSelector and namespaces",
        _nodes(CHINA, INDIA),
        [
            pod("a", "node1", ns="subteam1.team1", labels=S1),
            pod("b", "node1", ns="subteam1.team1", labels=S1),
            pod("c", "node1", ns="subteam2.team2", labels=S1),
            pod("d", "node2", ns="subteam2.team1", labels=S1),
        ],
        pod(ns="subteam1.team1", labels=S1, preferred=NS_SELECTED),
        [100, 0],
    ),
    _score(
        "anti-affinity to pods selected by a namespaceSelector",
        _nodes(CHINA, INDIA),
        [
            pod("a", "node1", ns="subteam1.team1", labels=S1),
            pod("b", "node1", ns="subteam1.team1", labels=S1),
            pod("c", "node1", ns="subteam1.team2", labels=S1),
            pod("d", "node2", ns="subteam2.team1", labels=S1),
        ],
        pod(ns="subteam1.team1", labels=S1, preferred_anti=NS_SELECTED),
        [0, 100],
    ),
    _score(
        "placed pods' preferred terms count for a pod without any",
        _nodes(CHINA, INDIA),
        [_mixed("a", node="node1", labels=S1), pod("b", "node2", labels=S2, preferred=STAY_S2_REGION)],
        pod(labels=S2),
        [0, 100],
    ),
]

# TestPreferredAffinityWithHardPodAffinitySymmetricWeight
HARD_NS = [
    term(is_in("service", "S1"), "region", namespaces=["default", "subteam2.team2"], ns_selector=TEAM1),
]
SERVICE_S1 = {"service": "S1"}
HARD_PLACED = [pod("a", "node1", affinity=HARD_NS), pod("b", "node2", affinity=HARD_NS)]
HARD_WEIGHT_CASES = [
    _score("with the default weight", THREE, HARD_PLACED, pod(labels=SERVICE_S1), [100, 100, 0], 1),
    _score("with weight zero", THREE, HARD_PLACED, pod(labels=SERVICE_S1), [0, 0, 0], 0),
    _score("in no selected namespace", THREE, HARD_PLACED, pod(ns="subteam1.team2", labels=SERVICE_S1), [0, 0, 0], 1),
    _score(
        "in a namespace the namespaceSelector selects",
        THREE,
        HARD_PLACED,
        pod(ns="subteam1.team1", labels=SERVICE_S1),
        [100, 100, 0],
        1,
    ),
    _score(
        "in a namespace the term names",
        THREE,
        HARD_PLACED,
        pod(ns="subteam2.team2", labels=SERVICE_S1),
        [100, 100, 0],
        1,
    ),
]
