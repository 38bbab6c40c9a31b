"""Node-level tables: the facts of kube-scheduler's `nodeaffinity/node_affinity_test.go`,
`tainttoleration/taint_toleration_test.go`, `nodeports/node_ports_test.go`,
`imagelocality/image_locality_test.go`, `nodename` and `nodeunschedulable` tests, as our own data.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kubesem.builders import Json, expr, exprs, pod, required_node_terms

AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TAINT = "node(s) had untolerated taint(s)"
PORTS = "node(s) didn't have free ports for the requested pod ports"
NODE_NAME = "node(s) didn't match the requested node name"
UNSCHEDULABLE = "node(s) were unschedulable"


def fields(*items: Json) -> Json:
    return {"matchFields": list(items)}


def both(expressions: Json, field_items: Json) -> Json:
    return {**expressions, **field_items}


def _a(case_id: str, manifest: Json, labels: dict[str, str], fit: bool, name: str = "node1") -> Any:
    return pytest.param(manifest, labels, name, fit, id=case_id)


def _terms(*terms: Json) -> Json:
    return required_node_terms(*terms)


NAME_IN_1 = expr("metadata.name", "In", "node1")
NODE_AFFINITY_CASES = [
    _a("missing labels", pod(node_selector={"foo": "bar"}), {}, False),
    _a("same labels", pod(node_selector={"foo": "bar"}), {"foo": "bar"}, True),
    _a("node labels are a superset", pod(node_selector={"foo": "bar"}), {"foo": "bar", "baz": "blah"}, True),
    _a("node labels are a subset", pod(node_selector={"foo": "bar", "baz": "blah"}), {"foo": "bar"}, False),
    _a("In matches", pod(node_affinity=_terms(exprs(expr("foo", "In", "bar", "value2")))), {"foo": "bar"}, True),
    _a(
        "Gt matches",
        pod(node_affinity=_terms(exprs(expr("kernel-version", "Gt", "0204")))),
        {"kernel-version": "0206"},
        True,
    ),
    _a(
        "Gt does not match",
        pod(node_affinity=_terms(exprs(expr("kernel-version", "Gt", "0206")))),
        {"kernel-version": "0206"},
        False,
    ),
    _a("Lt matches", pod(node_affinity=_terms(exprs(expr("gen", "Lt", "5")))), {"gen": "3"}, True),
    _a(
        "Lt with a negative bound does not parse",
        pod(node_affinity=_terms(exprs(expr("gen", "Lt", "-1")))),
        {"gen": "0"},
        False,
    ),
    _a("Gt with a non-integer label", pod(node_affinity=_terms(exprs(expr("gen", "Gt", "1")))), {"gen": "2a"}, False),
    _a(
        "Gt with a label written with spaces",
        pod(node_affinity=_terms(exprs(expr("gen", "Gt", "1")))),
        {"gen": " 5"},
        False,
    ),
    _a("Gt without the label", pod(node_affinity=_terms(exprs(expr("gen", "Gt", "1")))), {}, False),
    _a(
        "Gt with two values does not parse",
        pod(node_affinity=_terms(exprs(expr("gen", "Gt", "1", "2")))),
        {"gen": "5"},
        False,
    ),
    _a(
        "NotIn matches",
        pod(node_affinity=_terms(exprs(expr("mem-type", "NotIn", "DDR", "DDR2")))),
        {"mem-type": "DDR3"},
        True,
    ),
    _a(
        "NotIn matches a node without the label",
        pod(node_affinity=_terms(exprs(expr("mem-type", "NotIn", "DDR")))),
        {},
        True,
    ),
    _a("Exists matches", pod(node_affinity=_terms(exprs(expr("GPU", "Exists")))), {"GPU": "NVIDIA-GRID-K1"}, True),
    _a("DoesNotExist matches", pod(node_affinity=_terms(exprs(expr("GPU", "DoesNotExist")))), {"foo": "bar"}, True),
    _a(
        "In does not match",
        pod(node_affinity=_terms(exprs(expr("foo", "In", "value1", "value2")))),
        {"foo": "bar"},
        False,
    ),
    _a("an empty term matches nothing", pod(node_affinity=_terms({"matchExpressions": []})), {"foo": "bar"}, False),
    _a("no terms match nothing", pod(node_affinity=_terms()), {"foo": "bar"}, False),
    _a("no affinity fits", pod(), {"foo": "bar"}, True),
    _a(
        "affinity without required terms fits",
        pod(node_affinity={"preferredDuringSchedulingIgnoredDuringExecution": []}),
        {"foo": "bar"},
        True,
    ),
    _a(
        "requirements ANDed, all match",
        pod(node_affinity=_terms(exprs(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")))),
        {"GPU": "NVIDIA-GRID-K1"},
        True,
    ),
    _a(
        "requirements ANDed, one does not match",
        pod(node_affinity=_terms(exprs(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")))),
        {"GPU": "NVIDIA-GRID-K1"},
        False,
    ),
    _a(
        "terms ORed, one matches",
        pod(
            node_affinity=_terms(
                exprs(expr("foo", "In", "bar", "value2")), exprs(expr("diffkey", "In", "wrong", "value2"))
            )
        ),
        {"foo": "bar"},
        True,
    ),
    _a(
        "affinity and nodeSelector both satisfied",
        pod(node_selector={"foo": "bar"}, node_affinity=_terms(exprs(expr("foo", "Exists")))),
        {"foo": "bar"},
        True,
    ),
    _a(
        "affinity satisfied, nodeSelector not",
        pod(node_selector={"foo": "bar"}, node_affinity=_terms(exprs(expr("foo", "Exists")))),
        {"foo": "barrrrrr"},
        False,
    ),
    _a(
        "an invalid value makes the term match nothing",
        pod(node_affinity=_terms(exprs(expr("foo", "NotIn", "invalid value: ___@#$%^")))),
        {"foo": "bar"},
        False,
    ),
    _a(
        "an invalid term does not stop another from matching",
        pod(node_affinity=_terms(exprs(expr("foo", "NotIn", "bad value!")), exprs(expr("foo", "In", "bar")))),
        {"foo": "bar"},
        True,
    ),
    _a(
        "an unknown operator matches nothing",
        pod(node_affinity=_terms(exprs(expr("foo", "Near", "bar")))),
        {"foo": "bar"},
        False,
    ),
    _a("matchFields In matches the node's name", pod(node_affinity=_terms(fields(NAME_IN_1))), {}, True),
    _a("matchFields In does not match another node", pod(node_affinity=_terms(fields(NAME_IN_1))), {}, False, "node2"),
    _a(
        "matchFields does not match, a matchExpressions term does",
        pod(node_affinity=_terms(fields(NAME_IN_1), exprs(expr("foo", "In", "bar")))),
        {"foo": "bar"},
        True,
        "node2",
    ),
    _a(
        "one term with both: matchFields does not match",
        pod(node_affinity=_terms(both(exprs(expr("foo", "In", "bar")), fields(NAME_IN_1)))),
        {"foo": "bar"},
        False,
        "node2",
    ),
    _a(
        "one term with both, both match",
        pod(node_affinity=_terms(both(exprs(expr("foo", "In", "bar")), fields(NAME_IN_1)))),
        {"foo": "bar"},
        True,
    ),
    _a(
        "two terms, neither matches",
        pod(node_affinity=_terms(fields(NAME_IN_1), exprs(expr("foo", "In", "not-match-to-bar")))),
        {"foo": "bar"},
        False,
        "node2",
    ),
    _a(
        "two terms of node names",
        pod(node_affinity=_terms(fields(NAME_IN_1), fields(expr("metadata.name", "In", "node2")))),
        {},
        True,
        "node2",
    ),
    _a(
        "two conflicting field requirements",
        pod(node_affinity=_terms(fields(NAME_IN_1, expr("metadata.name", "In", "node2")))),
        {"foo": "bar"},
        False,
        "node2",
    ),
    _a(
        "matchFields NotIn",
        pod(node_affinity=_terms(fields(expr("metadata.name", "NotIn", "node1")))),
        {},
        True,
        "node2",
    ),
    _a(
        "matchFields with two values does not parse",
        pod(node_affinity=_terms(fields(expr("metadata.name", "In", "node1", "node2")))),
        {},
        False,
    ),
]

# TestNodeAffinityPriority: (id, pod, [(name, labels)], expected scores)
LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}


def preferred(*items: tuple[int, Json]) -> Json:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in items]}


AFFINITY1 = preferred((2, exprs(expr("foo", "In", "bar"))))
AFFINITY2 = preferred(
    (2, exprs(expr("foo", "In", "bar"))),
    (4, exprs(expr("key", "In", "value"))),
    (5, exprs(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
)
NODE_AFFINITY_SCORES = [
    pytest.param(pod(), [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)], [0, 0, 0], id="no node affinity"),
    pytest.param(
        pod(node_affinity=AFFINITY1),
        [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)],
        [0, 0, 0],
        id="no node matches",
    ),
    pytest.param(
        pod(node_affinity=AFFINITY1),
        [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
        [100, 0, 0],
        id="one matches",
    ),
    pytest.param(
        pod(node_affinity=AFFINITY2),
        [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
        [18, 100, 36],
        id="all match with different weights",
    ),
]

# Taints: (id, pod tolerations, node taints, fits)
T_USER1 = ("dedicated", "user1", "NoSchedule")


def tol(key: str = "", operator: str = "", value: str = "", effect: str = "") -> Json:
    out: Json = {}
    for name, item in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if item:
            out[name] = item
    return out


TAINT_FILTER_CASES = [
    pytest.param([], [T_USER1], False, id="no toleration"),
    pytest.param(
        [tol("dedicated", value="user1", effect="NoSchedule")], [T_USER1], True, id="tolerated, operator omitted"
    ),
    pytest.param([tol("dedicated", "Equal", "user2", "NoSchedule")], [T_USER1], False, id="another value"),
    pytest.param([tol("foo", "Exists", effect="NoSchedule")], [("foo", "bar", "NoSchedule")], True, id="Exists"),
    pytest.param(
        [tol("dedicated", "Equal", "user2", "NoSchedule"), tol("foo", "Exists", effect="NoSchedule")],
        [("dedicated", "user2", "NoSchedule"), ("foo", "bar", "NoSchedule")],
        True,
        id="several tolerated",
    ),
    pytest.param(
        [tol("foo", "Equal", "bar", "PreferNoSchedule")], [("foo", "bar", "NoSchedule")], False, id="another effect"
    ),
    pytest.param([tol("foo", "Equal", "bar")], [("foo", "bar", "NoSchedule")], True, id="empty effect tolerates any"),
    pytest.param(
        [tol("dedicated", "Equal", "user2", "NoSchedule")],
        [("dedicated", "user1", "PreferNoSchedule")],
        True,
        id="prefer",
    ),
    pytest.param([], [("dedicated", "user1", "PreferNoSchedule")], True, id="no toleration, prefer only"),
    pytest.param([], [("evict", "", "NoExecute")], False, id="NoExecute"),
    pytest.param(
        [tol("evict", "Exists", effect="NoExecute")], [("evict", "", "NoExecute")], True, id="NoExecute tolerated"
    ),
    pytest.param([tol(operator="Exists")], [T_USER1, ("evict", "x", "NoExecute")], True, id="Exists without key"),
    pytest.param(
        [tol(operator="Equal", value="")], [("a", "", "NoSchedule")], True, id="Equal without key, empty value"
    ),
    pytest.param([tol(operator="Equal", value="")], [("a", "x", "NoSchedule")], False, id="Equal without key, value"),
    pytest.param([tol("a", "Lt", "5")], [("a", "3", "NoSchedule")], False, id="an unknown operator"),
]


def _ts(case_id: str, tolerations: list[Json], nodes: list[list[tuple[str, str, str]]], want: list[int]) -> Any:
    return pytest.param(tolerations, nodes, want, id=case_id)


CPU_ARM = ("cpu-type", "arm64", "PreferNoSchedule")
DISK_SSD = ("disk-type", "ssd", "PreferNoSchedule")
TAINT_SCORE_CASES = [
    _ts(
        "tolerated taints score higher",
        [tol("foo", "Equal", "bar", "PreferNoSchedule")],
        [[("foo", "bar", "PreferNoSchedule")], [("foo", "blah", "PreferNoSchedule")]],
        [100, 0],
    ),
    _ts(
        "how many tolerated taints does not matter",
        [tol("cpu-type", "Equal", "arm64", "PreferNoSchedule"), tol("disk-type", "Equal", "ssd", "PreferNoSchedule")],
        [[], [CPU_ARM], [CPU_ARM, DISK_SSD]],
        [100, 100, 100],
    ),
    _ts(
        "more untolerated taints score lower",
        [tol("foo", "Equal", "bar", "PreferNoSchedule")],
        [[], [CPU_ARM], [CPU_ARM, DISK_SSD]],
        [100, 50, 0],
    ),
    _ts(
        "only PreferNoSchedule counts",
        [tol("cpu-type", "Equal", "arm64", "NoSchedule"), tol("disk-type", "Equal", "ssd", "NoSchedule")],
        [[], [("cpu-type", "arm64", "NoSchedule")], [CPU_ARM, DISK_SSD]],
        [100, 100, 0],
    ),
    _ts("no tolerations", [], [[], [CPU_ARM]], [100, 0]),
]

# Host ports: (id, wanted (protocol, ip, port), held on the node, fits)
PORT_CASES = [
    pytest.param([], [], True, id="no ports"),
    pytest.param([("UDP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 9090)], True, id="other port"),
    pytest.param([("UDP", "127.0.0.1", 8080)], [("UDP", "127.0.0.1", 8080)], False, id="same udp port"),
    pytest.param([("TCP", "127.0.0.1", 8080)], [("TCP", "127.0.0.1", 8080)], False, id="same tcp port"),
    pytest.param([("TCP", "127.0.0.1", 8080)], [("TCP", "127.0.0.2", 8080)], True, id="different host ip"),
    pytest.param([("UDP", "127.0.0.1", 8080)], [("TCP", "127.0.0.1", 8080)], True, id="different protocol"),
    pytest.param(
        [("UDP", "127.0.0.1", 8000), ("UDP", "127.0.0.1", 8080)],
        [("UDP", "127.0.0.1", 8080)],
        False,
        id="second udp conflict",
    ),
    pytest.param(
        [("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8080)],
        [("TCP", "127.0.0.1", 8001), ("UDP", "127.0.0.1", 8081)],
        False,
        id="first tcp conflict",
    ),
    pytest.param([("TCP", "0.0.0.0", 8001)], [("TCP", "127.0.0.1", 8001)], False, id="0.0.0.0 wanted"),
    pytest.param(
        [("TCP", "10.0.10.10", 8001), ("TCP", "0.0.0.0", 8001)],
        [("TCP", "127.0.0.1", 8001)],
        False,
        id="0.0.0.0 second",
    ),
    pytest.param([("TCP", "127.0.0.1", 8001)], [("TCP", "0.0.0.0", 8001)], False, id="0.0.0.0 held"),
    pytest.param([("UDP", "127.0.0.1", 8001)], [("TCP", "0.0.0.0", 8001)], True, id="0.0.0.0 held, other protocol"),
    pytest.param(
        [("UDP", "127.0.0.1", 8001)], [("TCP", "0.0.0.0", 8001), ("UDP", "0.0.0.0", 8001)], False, id="0.0.0.0 udp held"
    ),
    pytest.param([("", "", 8001)], [("TCP", "0.0.0.0", 8001)], False, id="defaults are TCP on 0.0.0.0"),
]

# Image locality: node images as (names, MiB); (id, pod images, init images, nodes, scores)
MB = 1024 * 1024
N_40_300_2000 = (
    (("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40),
    (("gcr.io/300:latest", "gcr.io/300:v1"), 300),
    (("gcr.io/2000:latest",), 2000),
)
N_250_10 = ((("gcr.io/250:latest",), 250), (("gcr.io/10:latest", "gcr.io/10:v1"), 10))
N_600_40_900 = ((("gcr.io/600:latest",), 600), (("gcr.io/40:latest",), 40), (("gcr.io/900:latest",), 900))
N_300_600_900 = ((("gcr.io/300:latest",), 300), (("gcr.io/600:latest",), 600), (("gcr.io/900:latest",), 900))
N_4000_30 = ((("gcr.io/4000:latest",), 4000), (("gcr.io/30:latest",), 30))
N_20_30_40 = ((("gcr.io/20:latest",), 20), (("gcr.io/30:latest",), 30), (("gcr.io/40:latest",), 40))
IMAGE_CASES = [
    pytest.param(["gcr.io/40", "gcr.io/250"], [], [N_40_300_2000, N_250_10], [0, 5], id="larger image preferred"),
    pytest.param(["gcr.io/40", "gcr.io/300"], [], [N_40_300_2000, N_250_10], [7, 0], id="two images on one node"),
    pytest.param(["gcr.io/10", "gcr.io/4000"], [], [N_4000_30, N_250_10], [100, 0], id="capped at the limit"),
    pytest.param(["gcr.io/10", "gcr.io/4000"], [], [N_4000_30, N_250_10, ()], [66, 0, 0], id="a node without images"),
    pytest.param(
        ["gcr.io/300", "gcr.io/600", "gcr.io/900"],
        [],
        [N_600_40_900, N_300_600_900, ()],
        [32, 36, 0],
        id="large images",
    ),
    pytest.param(["gcr.io/30", "gcr.io/40"], [], [N_20_30_40, N_4000_30], [1, 0], id="small images"),
    pytest.param(["gcr.io/30"], ["gcr.io/300"], [N_40_300_2000, N_20_30_40], [6, 0], id="init containers count"),
]
