"""Requests no node could ever satisfy, as a table: each refusal names its field (limits before requests),
the memory and count checks follow the nodes known (each in its own memory unit) and are skipped when
none is."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runtimekit.kube.objects import Pod
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.presets import preset_protocol
from runtimekit.webhook.fleet import Fleet, NodeGpus
from runtimekit.webhook.podrequests import pod_problems

KIT = KitProtocol.default()
HAMI = preset_protocol("hami")
NONE = Fleet()
H200S = Fleet((NodeGpus(8, 140, 1024), NodeGpus(4, 280, 512)))  # 143771 MiB GPUs, units of 1 GiB and 512 MiB
HAMI_FLEET = Fleet((NodeGpus(8, 143771, 1, frozenset({"1g.18gb"})),))
LIMIT = "spec.containers[0].resources.limits"


def pod(resources: dict[str, Any], init: dict[str, Any] | None = None, node: str = "") -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = [{"name": "setup", "resources": init}]
    if node:
        spec["nodeName"] = node
    return cast(Pod, {"metadata": {"name": "p"}, "spec": spec})


CASES: list[tuple[str, KitProtocol, Fleet, Pod, list[str]]] = [
    (
        "a share that fits",
        KIT,
        H200S,
        pod({"limits": {"aliyun.com/gpu-core.percentage": "30", "aliyun.com/gpu-memory": "8"}}),
        [],
    ),
    (
        "a share above 100 %",
        KIT,
        NONE,
        pod({"limits": {"aliyun.com/gpu-core.percentage": "150"}}),
        [f'{LIMIT}[aliyun.com/gpu-core.percentage]: Invalid value: "150": above 100 % of one GPU'],
    ),
    (
        "above 100 %, given in requests only",
        KIT,
        NONE,
        pod({"requests": {"aliyun.com/gpu-core.percentage": 101}}),
        ["spec.containers[0].resources.requests[aliyun.com/gpu-core.percentage]: Invalid value: 101: above 100 %"],
    ),
    (
        "memory no node's largest GPU holds",
        KIT,
        H200S,
        pod({"limits": {"aliyun.com/gpu-memory": "281"}}),
        [
            f'{LIMIT}[aliyun.com/gpu-memory]: Invalid value: "281": more GPU memory than any node',
            "(at most 280 of its memory units)",
        ],
    ),
    ("memory a node with small units holds", KIT, H200S, pod({"limits": {"aliyun.com/gpu-memory": "200"}}), []),
    ("memory with no node known", KIT, NONE, pod({"limits": {"aliyun.com/gpu-memory": "100000"}}), []),
    (
        "more GPUs than any node",
        KIT,
        H200S,
        pod({"limits": {"aliyun.com/gpu": "9"}}),
        [f'{LIMIT}[aliyun.com/gpu]: Invalid value: "9": more GPUs than any node has (at most 8)'],
    ),
    (
        "an unknown MIG profile",
        KIT,
        NONE,
        pod({"limits": {"aliyun.com/mig-9g.1tb": "1"}}),
        [f"{LIMIT}[aliyun.com/mig-9g.1tb]: Invalid value: \"1\": no GPU has the MIG profile '9g.1tb'"],
    ),
    ("a known MIG profile", KIT, NONE, pod({"limits": {"aliyun.com/mig-3g.71gb": "1"}}), []),
    (
        "a MIG slice with a share: the request rules speak",
        KIT,
        NONE,
        pod({"limits": {"aliyun.com/mig-3g.71gb": "1", "aliyun.com/gpu-core.percentage": "10"}}),
        ["spec.containers[0].resources: Invalid value: ", "a MIG slice cannot be combined with GPU shares"],
    ),
    (
        "an init container asking for a GPU",
        KIT,
        NONE,
        pod({}, init={"limits": {"aliyun.com/gpu": "1"}}),
        ["spec.initContainers[0].resources.limits[aliyun.com/gpu]: Forbidden: init containers do not get GPUs"],
    ),
    (
        "placed by hand",
        KIT,
        NONE,
        pod({"limits": {"aliyun.com/gpu": "1"}}, node="gpu-node-1"),
        ["spec.nodeName: Forbidden: a pod asking for GPUs is placed by the kit's scheduler"],
    ),
    ("placed by hand without GPUs is fine", KIT, NONE, pod({"limits": {"cpu": "1"}}, node="gpu-node-1"), []),
    (
        "hami: a memory percentage above 100",
        HAMI,
        NONE,
        pod({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "120"}}),
        [f'{LIMIT}[nvidia.com/gpumem-percentage]: Invalid value: "120": above 100 % of one GPU\'s memory'],
    ),
    (
        "hami: cores above 100 count as 100, as HAMi clamps them (its webhook lets them through)",
        HAMI,
        NONE,
        pod({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "120"}}),
        [],
    ),
    (
        "hami: memory alone (the mutating webhook adds the count first)",
        HAMI,
        NONE,
        pod({"limits": {"nvidia.com/gpumem": "3000"}}),
        ["spec.containers[0].resources: Invalid value: ", "ask for nvidia.com/gpu: 1 as well"],
    ),
    (
        "hami: memory in MiB that fits",
        HAMI,
        HAMI_FLEET,
        pod({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "143771"}}),
        [],
    ),
    (
        "hami: a profile only a node shows is known",
        HAMI,
        Fleet((NodeGpus(1, 100, 1, frozenset({"5g.custom"})),)),
        pod({"limits": {"nvidia.com/mig-5g.custom": "1"}}),
        [],
    ),
]


@pytest.mark.parametrize(("name", "protocol", "fleet", "given", "expected"), CASES, ids=[c[0] for c in CASES])
def test_pod_problems(name: str, protocol: KitProtocol, fleet: Fleet, given: Pod, expected: list[str]) -> None:
    rendered = [p.render() for p in pod_problems(given, protocol, fleet, created=True)]
    if not expected:
        assert rendered == []
        return
    assert len(rendered) == 1, rendered
    for part in expected:
        assert part in rendered[0], (part, rendered[0])


def test_a_node_placed_pod_is_only_refused_at_create() -> None:
    placed = pod({"limits": {"aliyun.com/gpu": "1"}}, node="gpu-node-1")
    assert pod_problems(placed, KIT, NONE, created=False) == []
