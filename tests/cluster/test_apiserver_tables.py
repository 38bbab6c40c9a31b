"""Server-side printing as pure functions: ages, pod STATUS, node GPU cells, JSONPath columns,
routing and content negotiation."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.printers import json_path
from runtimekit.cluster.apiserver.printers_base import human_duration
from runtimekit.cluster.apiserver.routing import (
    GroupVersionPath,
    Output,
    Target,
    decode_continue,
    encode_continue,
    negotiate,
    parse_bool,
    parse_path,
)
from runtimekit.cluster.apiserver.tables import TableMaker, pod_status
from runtimekit.model import Assignment, GpuShare, GpuUUID, NodeInventory, NodeName
from runtimekit.protocol import KitProtocol


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (10 * 86400, "10d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def container(state: dict[str, Any], ready: bool = False, restarts: int = 0) -> dict[str, Any]:
    return {"state": state, "ready": ready, "restartCount": restarts}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"spec": {"containers": [{}]}, "status": {"phase": "Pending"}}, ("Pending", 0, 1, 0)),
        (
            {
                "spec": {"containers": [{}, {}]},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [container({"running": {}}, True, 2), container({"running": {}}, True)],
                },
            },
            ("Running", 2, 2, 2),
        ),
        (
            {
                "spec": {"containers": [{}]},
                "status": {
                    "phase": "Pending",
                    "containerStatuses": [container({"waiting": {"reason": "ImagePullBackOff"}})],
                },
            },
            ("ImagePullBackOff", 0, 1, 0),
        ),
        (
            {
                "spec": {"containers": [{}]},
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [container({"terminated": {"reason": "Completed", "exitCode": 0}})],
                },
            },
            ("Completed", 0, 1, 0),
        ),
        (
            {
                "spec": {"containers": [{}]},
                "status": {"phase": "Failed", "containerStatuses": [container({"terminated": {"exitCode": 3}})]},
            },
            ("ExitCode:3", 0, 1, 0),
        ),
        (
            {
                "spec": {"initContainers": [{}, {}], "containers": [{}]},
                "status": {
                    "phase": "Pending",
                    "initContainerStatuses": [container({"terminated": {"exitCode": 0}}), container({"running": {}})],
                },
            },
            ("Init:1/2", 0, 1, 0),
        ),
        (
            {
                "metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
                "spec": {"containers": [{}]},
                "status": {"phase": "Running"},
            },
            ("Terminating", 0, 1, 0),
        ),
    ],
    ids=["pending", "running", "waiting", "completed", "exit-code", "init", "terminating"],
)
def test_pod_status(pod: dict[str, Any], expected: tuple[str, int, int, int]) -> None:
    assert pod_status(pod) == expected


def test_gpu_cells() -> None:
    protocol = KitProtocol.default()
    maker = TableMaker(protocol, lambda: 0.0)
    inventory = NodeInventory.simulated("n", "L4", 3)
    node = {"metadata": {"name": "n", "annotations": {protocol.annotations.node_devices: inventory.to_annotation()}}}
    assert maker.node_gpus(node) == ("3x L4", 3000)
    assert maker.node_gpus({"metadata": {"name": "n"}, "status": {"capacity": {protocol.resources.gpu: "2"}}}) == (
        "2",
        2000,
    )
    assert maker.node_gpus({"metadata": {"name": "n", "annotations": {protocol.annotations.node_devices: "{"}}}) == (
        "<invalid>",
        0,
    )
    shares = {"c": (GpuShare(GpuUUID("a"), 0, 250, 1),), "d": (GpuShare(GpuUUID("b"), 1, 1000, 1),)}
    assignment = Assignment(NodeName("n"), shares)
    res = protocol.resources
    containers = [
        {"name": "c", "resources": {"limits": {res.core: "25"}}},
        {"name": "d", "resources": {"limits": {res.gpu: "1"}}},
    ]
    pod = {
        "metadata": {"annotations": {protocol.annotations.assignment: assignment.to_annotation()}},
        "spec": {"containers": containers},
    }
    assert maker.pod_gpu(pod) == ("GPU0:25%,GPU1:100%", 1250)
    mig = {
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {protocol.resources.mig_prefix + "1g.18gb": "1"}}}]
        }
    }
    assert maker.pod_gpu(mig) == ("1g.18gb (requested)", 0)


@pytest.mark.parametrize(
    ("limits", "shares"),
    [
        ({}, [(0, 1000), (1, 1000)]),  # a pod asking for no GPU claims two whole ones
        ({"core": "1"}, [(0, 1000)]),  # 1 % asked, a whole GPU written
        ({"gpu": "1"}, [(0, 1000), (1, 1000)]),  # one GPU asked, two written
        ({"gpu": "1"}, [(0, 1000), (0, 1000)]),  # the same GPU twice
    ],
    ids=["cpu-only", "more-compute", "more-gpus", "twice"],
)
def test_an_assignment_unequal_to_the_requests_shows_refused_and_adds_nothing(
    limits: dict[str, str], shares: list[tuple[int, int]]
) -> None:
    protocol = KitProtocol.default()
    maker = TableMaker(protocol, lambda: 0.0)
    names = {"core": protocol.resources.core, "gpu": protocol.resources.gpu}
    written = Assignment(NodeName("n"), {"c": tuple(GpuShare(GpuUUID(f"g{i}"), i, m, 1) for i, m in shares)})
    pod = {
        "metadata": {"annotations": {protocol.annotations.assignment: written.to_annotation()}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {names[k]: v for k, v in limits.items()}}}]},
    }
    assert maker.pod_gpu(pod) == ("<refused>", 0)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (".spec.size", 3),
        (".status.items[1].name", "b"),
        (".metadata.labels.example\\.com/x", "y"),
        (".missing.deep", None),
        ("{.spec.size}", 3),
    ],
)
def test_json_path(path: str, value: Any) -> None:
    obj = {
        "spec": {"size": 3},
        "status": {"items": [{"name": "a"}, {"name": "b"}]},
        "metadata": {"labels": {"example.com/x": "y"}},
    }
    assert json_path(obj, path) == value


@pytest.mark.parametrize(
    ("path", "parsed"),
    [
        ("/api", GroupVersionPath(True)),
        ("/api/v1/", GroupVersionPath(True, "", "v1")),
        ("/apis", GroupVersionPath(False)),
        ("/apis/apps", GroupVersionPath(False, "apps")),
        ("/apis/apps/v1", GroupVersionPath(False, "apps", "v1")),
        ("/api/v1/nodes", Target("", "v1", "nodes")),
        ("/api/v1/nodes/n1/status", Target("", "v1", "nodes", None, "n1", "status")),
        ("/api/v1/namespaces/ns1", Target("", "v1", "namespaces", None, "ns1")),
        ("/api/v1/namespaces/ns1/status", Target("", "v1", "namespaces", None, "ns1", "status")),
        ("/api/v1/namespaces/ns1/pods", Target("", "v1", "pods", "ns1")),
        ("/api/v1/namespaces/ns1/pods/p/binding", Target("", "v1", "pods", "ns1", "p", "binding")),
        ("/apis/apps/v1/namespaces/ns1/deployments/d", Target("apps", "v1", "deployments", "ns1", "d")),
        ("/api/v1/watch/namespaces/ns1/pods/p", Target("", "v1", "pods", "ns1", "p", "", watch=True)),
        ("/api/v1/namespaces/ns1/pods/p/a/b", None),
        ("/metrics", None),
    ],
)
def test_parse_path(path: str, parsed: object) -> None:
    assert parse_path(path) == parsed


@pytest.mark.parametrize(
    ("accept", "output", "version"),
    [
        ("", Output.JSON, "v1"),
        ("application/json", Output.JSON, "v1"),
        ("*/*", Output.JSON, "v1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", Output.TABLE, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", Output.TABLE, "v1beta1"),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", Output.JSON, "v1"),
        ("application/vnd.kubernetes.protobuf,application/json", Output.JSON, "v1"),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", Output.PARTIAL, "v1"),
    ],
)
def test_negotiate(accept: str, output: Output, version: str) -> None:
    rendering = negotiate(accept)
    assert (rendering.output, rendering.version) == (output, version)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", False), ("1", True), ("true", True), ("True", True), ("TRUE", True), ("0", False), ("False", False)],
)
def test_parse_bool(value: str, expected: bool) -> None:
    assert parse_bool({"watch": value}, "watch") is expected


def test_continue_tokens_round_trip() -> None:
    assert decode_continue(encode_continue(42, ("ns", "name"))) == (42, ("ns", "name"))
    with pytest.raises(ApiError):
        decode_continue("bm90IGpzb24")
