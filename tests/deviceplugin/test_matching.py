"""Which pod an Allocate is for (ARCHITECTURE §4), and which IDs to prefer, as tables."""

from __future__ import annotations

import math

import pytest
from dp_helpers import NODE, PROTOCOL, RES, gpu_pod

from runtimekit.deviceplugin.matching import (
    Candidate,
    MatchCache,
    NoMatch,
    encode_allocated,
    match,
    parse_allocated,
    parse_assume_time,
    preferred_ids,
)
from runtimekit.deviceplugin.resources import ResourceKind
from runtimekit.model import GpuShare, GpuUUID

CORE30 = {RES.core: 30}


def share_pod(name: str, gpu: str = "GPU-0", assume: float | None = 1.0, **kw: object) -> dict[str, object]:
    return gpu_pod(name, [("main", {RES.core: 30, RES.memory: 4}, [(gpu, 0, 300, 4096)])], assume, **kw)  # type: ignore[arg-type]


def matched(pods: list[dict[str, object]], resource: str = RES.core, size: int = 30, **kw: object) -> str:
    found = match(pods, NODE, resource, size, PROTOCOL, **kw)  # type: ignore[arg-type]
    return found.reason if isinstance(found, NoMatch) else f"{found.name}/{found.container}"


def created(pod: dict[str, object], at: str) -> dict[str, object]:
    pod["metadata"]["creationTimestamp"] = at  # type: ignore[index]
    return pod


def with_allocated(pod: dict[str, object], record: dict[str, list[str]]) -> dict[str, object]:
    pod["metadata"]["annotations"][PROTOCOL.annotations.allocated] = encode_allocated(record)  # type: ignore[index]
    return pod


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([share_pod("a")], "a/main", id="one"),
        pytest.param([share_pod("young", assume=5), share_pod("old", assume=2)], "old/main", id="oldest-assume-wins"),
        pytest.param(
            [
                created(share_pod("late", assume=1), "2026-01-01T00:00:09Z"),
                created(share_pod("early", assume=8), "2026-01-01T00:00:02Z"),
            ],
            "early/main",
            id="kubelet-admits-by-creation-first",
        ),
        pytest.param(
            [
                created(share_pod("b2", assume=7), "2026-01-01T00:00:02Z"),
                created(share_pod("b1", assume=4), "2026-01-01T00:00:02Z"),
            ],
            "b1/main",
            id="same-second-by-assume-time",
        ),
        pytest.param(
            [share_pod("unknown", assume=None), share_pod("known", assume=9)], "known/main", id="no-assume-last"
        ),
        pytest.param([share_pod("other", node="node-b"), share_pod("mine", assume=3)], "mine/main", id="other-node"),
        pytest.param([share_pod("done", phase="Succeeded"), share_pod("b", assume=3)], "b/main", id="finished-skipped"),
        pytest.param([share_pod("plain", assigned=False), share_pod("b", assume=3)], "b/main", id="unassigned-skipped"),
        pytest.param(
            [with_allocated(share_pod("a"), {"main": [RES.core]}), share_pod("b", assume=3)],
            "b/main",
            id="already-allocated-skipped",
        ),
        pytest.param([with_allocated(share_pod("a"), {"main": [RES.memory]})], "a/main", id="other-resource-allocated"),
    ],
)
def test_match(pods: list[dict[str, object]], expected: str) -> None:
    assert matched(pods) == expected


def test_size_must_match_and_containers_go_in_order() -> None:
    pod = gpu_pod(
        "multi",
        [
            ("first", {RES.core: 20}, [("GPU-0", 0, 200, 0)]),
            ("second", {RES.core: 30}, [("GPU-1", 1, 300, 0)]),
            ("third", {RES.core: 30}, [("GPU-1", 1, 300, 0)]),
        ],
    )
    assert matched([pod], size=30) == "multi/second"
    assert matched([pod], size=20) == "multi/first"
    assert matched([with_allocated(pod, {"second": [RES.core]})], size=30) == "multi/third"


def test_recently_allocated_counts_as_allocated() -> None:
    assert matched([share_pod("a")], recently_allocated={("uid-a", "main", RES.core)}).startswith("no pod")


def test_no_match_says_why() -> None:
    pods = [
        share_pod("wrong-size"),
        with_allocated(share_pod("done-already"), {"main": [RES.core]}),
        share_pod("unassigned", assigned=False),
    ]
    reason = matched(pods, size=50)
    assert reason.startswith(f"no pod bound to node {NODE} is waiting for 50 {RES.core}")
    assert "default/wrong-size container main asks 30" in reason
    assert "default/done-already container main: already allocated" in reason
    assert "default/unassigned: not assigned by the scheduler" in reason
    assert matched([], size=1) == (
        f"no pod bound to node {NODE} is waiting for 1 {RES.core} (assigned by the scheduler and not yet allocated)"
    )


def test_candidate_carries_shares_and_version() -> None:
    found = match([share_pod("a", gpu="GPU-7")], NODE, RES.memory, 4, PROTOCOL)
    assert isinstance(found, Candidate)
    assert found.shares == (GpuShare(GpuUUID("GPU-7"), 0, 300, 4096),)
    assert (found.uid, found.resource_version, found.assume_time) == ("uid-a", "", 1_700_000_001.0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1700000000", 1_700_000_000.0),
        ("1700000000123", 1_700_000_000.123),
        ("1700000000123456", 1_700_000_000.123456),
        ("1700000000123456789", 1_700_000_000.123456789),
        ("2023-11-14T22:13:20Z", 1_700_000_000.0),
        ("garbage", math.inf),
        (None, math.inf),
    ],
)
def test_parse_assume_time(text: str | None, seconds: float) -> None:
    assert parse_assume_time(text) == pytest.approx(seconds)


def test_allocated_codec() -> None:
    text = encode_allocated({"b": [RES.memory, RES.core, RES.core], "a": [RES.gpu]})
    assert text == (
        '{"containers":{"a":["aliyun.com/gpu"],"b":["aliyun.com/gpu-core.percentage","aliyun.com/gpu-memory"]},'
        '"version":1}'
    )
    assert parse_allocated(text) == {"a": (RES.gpu,), "b": (RES.core, RES.memory)}
    assert parse_allocated("nonsense") == parse_allocated(None) == {}


def ids(gpu: str, n: int) -> list[str]:
    return [f"{gpu}::{i}" for i in range(n)]


def share(uuid: str) -> GpuShare:
    return GpuShare(GpuUUID(uuid), 0, 100, 0)


@pytest.mark.parametrize(
    ("kind", "shares", "available", "must", "size", "expected"),
    [
        pytest.param(
            ResourceKind.CORE, [share("G1")], ids("G0", 5) + ids("G1", 5), [], 3, ids("G1", 3), id="steer-to-assigned"
        ),
        pytest.param(
            ResourceKind.CORE,
            [share("G0"), share("G1")],
            ids("G0", 5) + ids("G1", 5),
            [],
            4,
            ["G0::0", "G0::1", "G1::0", "G1::1"],
            id="spread-over-assigned",
        ),
        pytest.param(
            ResourceKind.CORE, [share("G1")], ids("G0", 5) + ids("G1", 2), [], 3, ["G1::0", "G1::1", "G0::0"], id="fill"
        ),
        pytest.param(
            ResourceKind.GPU, [share("G2"), share("G0")], ["G0", "G1", "G2"], [], 2, ["G2", "G0"], id="whole-gpus"
        ),
        pytest.param(
            ResourceKind.CORE, [share("G1")], ids("G0", 3) + ids("G1", 3), ["G0::2"], 2, ["G0::2", "G1::0"], id="must"
        ),
        pytest.param(ResourceKind.CORE, [], ids("G0", 2) + ids("G1", 4), [], 3, ids("G1", 3), id="no-pod-packs"),
        pytest.param(
            ResourceKind.CORE,
            [share("G1")],
            ["G1::10", "G1::2", "G1::9"],
            [],
            2,
            ["G1::2", "G1::9"],
            id="natural-order",
        ),
    ],
)
def test_preferred_ids(
    kind: ResourceKind,
    shares: list[GpuShare],
    available: list[str],
    must: list[str],
    size: int,
    expected: list[str],
) -> None:
    assert preferred_ids(kind, shares, available, must, size) == expected


def at_version(pod: dict[str, object], version: str) -> dict[str, object]:
    pod["metadata"]["resourceVersion"] = version  # type: ignore[index]
    return pod


def test_the_match_cache_follows_resource_versions() -> None:
    cache = MatchCache()
    pod = at_version(share_pod("p"), "7")
    assert matched([pod], cache=cache) == "p/main"
    allocated = at_version(with_allocated(share_pod("p"), {"main": [RES.core]}), "8")
    assert "already allocated" in matched([allocated], cache=cache)  # a new version is read again
    assert matched([pod], cache=cache) == "p/main"  # version 7 is still what it was
    unversioned = share_pod("q")
    assert matched([unversioned], cache=cache) == "q/main"
    with_allocated(unversioned, {"main": [RES.core]})  # no resourceVersion: never taken from the cache
    assert "already allocated" in matched([unversioned], cache=cache)


def test_the_match_cache_keeps_the_recently_allocated_filter_outside() -> None:
    cache = MatchCache()
    pod = at_version(share_pod("p"), "7")
    assert matched([pod], cache=cache) == "p/main"
    recent = {("uid-p", "main", RES.core)}
    assert "already allocated" in matched([pod], cache=cache, recently_allocated=recent)
    assert matched([pod], cache=cache) == "p/main"
