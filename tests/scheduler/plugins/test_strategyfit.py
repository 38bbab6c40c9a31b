"""`resource-strategy-fit` with the cases of Volcano's own tests (pkg/scheduler/plugins/
resource-strategy-fit: resource_strategy_fit_test.go's TestScore, Test_calculateWeight and
Test_findResourceConfigWithPrefix, sra_test.go's TestArguments and TestNode, proportional_test.go),
run through a real session: the plugin built from a conf, nodes in a StaticCache, pods parsed as the
live cache parses them. Units follow the kit (milli-CPU, bytes); Volcano's ratios are unit-free."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from runtimekit.model import NodeCapacity, NodeInventory, NodeName
from runtimekit.model.scalars import scalars_of
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import NodeMeta
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.plugins.strategyfit import (
    LEAST,
    MOST,
    ResourceStrategyFit,
    Strategy,
    _configured,
    parse_args,
)

P = KitProtocol.default()
GI = 1 << 30


def session(arguments: Mapping[str, Any], nodes: list[tuple[str, int, int, dict[str, int]]]) -> Session:
    """A session of one tier with the plugin; nodes as (name, cpu milli, memory bytes, scalars)."""
    entries = []
    for name, cpu, memory, scalars in nodes:
        meta = NodeMeta(NodeName(name), {}, (), False, "", True)
        entries.append((NodeInventory(NodeName(name)), NodeCapacity(cpu, memory, 110, scalars_of(scalars)), meta))
    plugin = f"  - name: resource-strategy-fit\n    arguments: {json.dumps(arguments)}\n"
    conf = parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n{plugin}')
    return Framework(conf, builtin_registry(), BuildContext()).open_session(StaticCache(entries))


def pod(name: str, cpu: str, memory: str, annotations: dict[str, str] | None = None, **scalars: str) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v not in ("0", "0Gi", "")}
    requests.update({k.replace("_", "."): v for k, v in scalars.items()})
    requests = {
        k.replace("nvidia.com.", "nvidia.com/").replace("example.com.", "example.com/"): v for k, v in requests.items()
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "c1", "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests, "limits": requests}}]},
    }


def scores(ssn: Session, manifest: dict[str, Any], nodes: list[str]) -> list[float]:
    plugin = next(p for p in ssn.plugins.every.flat if isinstance(p, ResourceStrategyFit))
    rows = np.array([ssn.table.row(n) for n in nodes], np.int64)
    return [float(s) for s in plugin.node_order(task_from_pod(manifest, P), rows, ssn)]


def strategies(weight: int, **resources: tuple[str, int]) -> dict[str, Any]:
    return {
        "resourceStrategyFitWeight": weight,
        "resources": {name: {"type": kind, "weight": w} for name, (kind, w) in resources.items()},
    }


# TestScore: task (cpu, memory), node (used cpu, used memory, allocatable cpu, allocatable memory), conf
SCORE_CASES = [
    ("test1", (100, 100), (200, 200, 500, 500), strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)), {}, 400),
    ("test2", (100, 100), (200, 200, 400, 400), strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)), {}, 250),
    ("test3", (100, 100), (200, 200, 500, 500), strategies(10, cpu=(MOST, 1), memory=(MOST, 1)), {}, 600),
    ("test4", (100, 100), (200, 200, 400, 400), strategies(10, cpu=(MOST, 1), memory=(MOST, 1)), {}, 750),
    ("test5", (100, 100), (200, 200, 500, 500), strategies(10, cpu=(LEAST, 2), memory=(MOST, 1)), {}, 466.66666667),
    ("test6", (100, 100), (200, 200, 500, 500), strategies(10, cpu=(LEAST, 1), memory=(MOST, 2)), {}, 533.33333333),
    ("test7", (0, 100), (200, 200, 500, 500), strategies(10, cpu=(LEAST, 1), memory=(MOST, 2)), {}, 600),
    ("test8", (100, 100), (200, 200, 0, 400), strategies(10, cpu=(LEAST, 1), memory=(MOST, 2)), {}, 500),
    ("test9", (100, 100), (200, 200, 500, 500), strategies(10, memory=(MOST, 2)), {}, 600),
    (
        "pod-level-scoring-least-allocated",
        (100, 100),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {
            "volcano.sh/resource-strategy-scoring-type": LEAST,
            "volcano.sh/resource-strategy-weight": '{"cpu": 2, "memory": 1}',
        },
        400,
    ),
    (
        "pod-level-scoring-most-allocated",
        (100, 100),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {
            "volcano.sh/resource-strategy-scoring-type": MOST,
            "volcano.sh/resource-strategy-weight": '{"cpu": 1, "memory": 2}',
        },
        600,
    ),
    (
        "pod-level-scoring-invalid-json",
        (100, 100),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {"volcano.sh/resource-strategy-scoring-type": LEAST, "volcano.sh/resource-strategy-weight": "invalid-json"},
        0,
    ),
    (
        "pod-level-scoring-missing-resource-weight",
        (100, 100),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {"volcano.sh/resource-strategy-scoring-type": LEAST, "volcano.sh/resource-strategy-weight": '{"cpu": 2}'},
        400,
    ),
    (
        "zero-resources-requested",
        (0, 0),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {},
        0,
    ),
    (
        "node-fully-allocated",
        (100, 100),
        (500, 500, 500, 500),
        strategies(10, cpu=(LEAST, 1), memory=(LEAST, 1)),
        {},
        0,
    ),
    (
        "mixed-scoring-strategies",
        (100, 100),
        (200, 200, 500, 500),
        strategies(10, cpu=(LEAST, 3), memory=(MOST, 1)),
        {},
        450,
    ),
    (
        "high-weight-scenario",
        (100, 100),
        (200, 200, 500, 500),
        strategies(20, cpu=(LEAST, 5), memory=(LEAST, 5)),
        {},
        800,
    ),
]


@pytest.mark.parametrize(
    ("name", "task", "node", "arguments", "annotations", "want"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES]
)
def test_volcanos_score_cases(
    name: str,
    task: tuple[int, int],
    node: tuple[int, int, int, int],
    arguments: dict[str, Any],
    annotations: dict[str, str],
    want: float,
) -> None:
    used_cpu, used_memory, cpu, memory = node
    # the kit's node table is in milli-CPU and bytes: Volcano's figures, read as milli and bytes x 1000
    ssn = session(arguments, [("n1", cpu, memory * 1000, {})])
    row = ssn.table.row("n1")
    ssn.table.cpu_free[row] = cpu - used_cpu
    ssn.table.mem_free[row] = (memory - used_memory) * 1000
    manifest = pod("p", f"{task[0]}m" if task[0] else "0", str(task[1] * 1000) if task[1] else "0")
    if annotations:
        manifest["metadata"]["annotations"] = annotations
    assert scores(ssn, manifest, ["n1"]) == [pytest.approx(want, abs=1e-6)]


def test_volcanos_argument_cases() -> None:
    warnings: list[str] = []
    base = {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}}
    assert parse_args({"resourceStrategyFitWeight": 10, "resources": base}, warnings.append).resources == {
        "cpu": Strategy(MOST, 1),
        "memory": Strategy(LEAST, 2),
    }
    assert parse_args({"resources": base}, warnings.append).weight == 10  # test2: the default weight
    assert parse_args({"resourceStrategyFitWeight": 10}, warnings.append).resources == {
        "cpu": Strategy(LEAST, 1),
        "memory": Strategy(LEAST, 1),
    }
    four = parse_args(
        {"resources": {"cpu": {"type": LEAST, "weight": 1}, "*": {"type": MOST, "weight": 2}}}, warnings.append
    )
    assert four.resources == {"cpu": Strategy(LEAST, 1)}
    five = {"nvidia.com/gpu/*": {"type": MOST, "weight": 3}, "cloudml.gpu**": {"type": LEAST, "weight": 2}}
    assert parse_args({"resources": five}, warnings.append).resources == {"nvidia.com/gpu/*": Strategy(MOST, 3)}
    six = {
        "memory": {"type": LEAST, "weight": 1},
        "cloudml.*.gpu": {"type": MOST, "weight": 2},
        "*.com/gpu": {"type": MOST, "weight": 3},
    }
    assert parse_args({"resources": six}, warnings.append).resources == {"memory": Strategy(LEAST, 1)}
    odd = parse_args(
        {"resources": {"x": {"type": "Balanced", "weight": -3}}, "resourceStrategyFitWeight": -1}, warnings.append
    )
    assert (odd.weight, odd.resources) == (10, {"x": Strategy(LEAST, 1)})
    assert any("'*'" in w for w in warnings)
    arguments = {
        "sra": {
            "enable": True,
            "resources": "nvidia.com/t4, nvidia.com/a10",
            "weight": 3,
            "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2},
        },
        "proportional": {
            "enable": True,
            "resources": "nvidia.com/t4, nvidia.com/a10",
            "resourceProportion": {
                "nvidia.com/t4.cpu": 3,
                "nvidia.com/t4.memory": 6,
                "nvidia.com/a10.cpu": 4,
                "nvidia.com/a10.memory": 8,
            },
        },
    }
    both = parse_args(arguments, warnings.append)
    assert (both.sra_weight, dict(both.sra)) == (3, {"nvidia.com/t4": 1, "nvidia.com/a10": 2})
    assert both.proportional == {"nvidia.com/t4": (3.0, 6.0), "nvidia.com/a10": (4.0, 8.0)}


def test_the_longest_wildcard_prefix_wins_and_an_exact_name_first() -> None:
    resources = {
        "nvidia.com/gpu": Strategy(MOST, 1),
        "nvidia.com/*": Strategy(LEAST, 2),
        "nvidia.com/gpu/*": Strategy(MOST, 3),
        "cloudml.gpu/*": Strategy(LEAST, 4),
        "cloudml.gpu/tensorflow/*": Strategy(MOST, 5),
    }
    assert _configured("nvidia.com/gpu", resources) == Strategy(MOST, 1)
    assert _configured("nvidia.com/gpu/v100", resources) == Strategy(MOST, 3)
    assert _configured("nvidia.com/a10", resources) == Strategy(LEAST, 2)
    assert _configured("example.com/foo", resources) is None
    assert _configured("any.resource", {}) is None
    assert _configured("cloudml.gpu/tensorflow/v2", resources) == Strategy(MOST, 5)


SRA_NODES = [
    ("n1", 32000, 64 * GI, {}),
    ("n2", 8000, 16 * GI, {"nvidia.com/t4": 16}),
    ("n3", 8000, 16 * GI, {"nvidia.com/a10": 16}),
    ("n4", 8000, 16 * GI, {"nvidia.com/t4": 8, "nvidia.com/a10": 16}),
]
SRA_PODS = [
    pod("p1", "1", "1Gi"),
    pod("p2", "1.5", "0Gi", nvidia_com_t4="2"),
    pod("p3", "2", "4Gi", nvidia_com_a10="2"),
    pod("p4", "3", "4Gi", nvidia_com_t4="1", nvidia_com_a10="3"),
]
T4_MOST = {"nvidia.com/t4": {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}}


def sra(resources: str, weight: int, **weights: int) -> dict[str, Any]:
    """Volcano's sra argument; `nvidia_com_t4=2` weighs nvidia.com/t4."""
    named = {"nvidia.com/" + key.removeprefix("nvidia_com_"): value for key, value in weights.items()}
    return {"enable": True, "resources": resources, "weight": weight, "resourceWeight": named}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {
                "resourceStrategyFitWeight": 0,
                "sra": sra("nvidia.com/t4, nvidia.com/a10", 5, nvidia_com_t4=2, nvidia_com_a10=3),
            },
            [[500, 300, 200, 0], [0, 300, 0, 0], [0, 0, 200, 0], [0, 0, 0, 0]],
        ),
        (
            {"resourceStrategyFitWeight": 0, "sra": sra("nvidia.com/t4", 5, nvidia_com_t4=2)},
            [[500, 0, 500, 0], [0, 0, 0, 0], [0, 0, 500, 0], [0, 0, 0, 0]],
        ),
        (
            {"resourceStrategyFitWeight": 8, "resources": T4_MOST, "sra": sra("nvidia.com/t4", 0, nvidia_com_t4=2)},
            [[775, 700, 700, 700], [190.625, 237.5, 162.5, 312.5], [750, 600, 600, 600], [181.25, 162.5, 125, 200]],
        ),
        (
            {"resourceStrategyFitWeight": 8, "resources": T4_MOST, "sra": sra("nvidia.com/t4", 5, nvidia_com_t4=2)},
            [[1275, 700, 1200, 700], [190.625, 237.5, 162.5, 312.5], [750, 600, 1100, 600], [181.25, 162.5, 125, 200]],
        ),
    ],
    ids=["case1-two-gpu-kinds", "case2-one-gpu-kind", "case3-strategy-only", "case4-strategy-and-sra"],
)
def test_volcanos_sra_cases(arguments: dict[str, Any], expected: list[list[float]]) -> None:
    ssn = session(arguments, SRA_NODES)
    for manifest, want in zip(SRA_PODS, expected, strict=True):
        got = scores(ssn, manifest, ["n1", "n2", "n3", "n4"])
        assert got == [pytest.approx(w, abs=1e-6) for w in want], manifest["metadata"]["name"]


@pytest.mark.parametrize(
    ("cpu", "memory", "gpus", "node", "passes"),
    [
        ("4", "4G", "", "n1", True),  # cpu_task_less_than_reserved_resource
        ("10", "10G", "", "n1", False),  # cpu_task_greater_than_reserved_resource
        ("10", "10G", "1", "n1", True),  # gpu_task_no_proportional_check
        ("10", "10G", "", "n2", True),  # cpu_task_less_than_idle_resource
    ],
)
def test_volcanos_proportional_cases(cpu: str, memory: str, gpus: str, node: str, passes: bool) -> None:
    arguments = {
        "proportional": {
            "enable": True,
            "resources": "nvidia.com/gpu",
            "resourceProportion": {"nvidia.com/gpu.cpu": 4, "nvidia.com/gpu.memory": 4},
        }
    }
    nodes = [("n1", 30000, 30 * 10**9, {"nvidia.com/gpu": 6}), ("n2", 26000, 26 * 10**9, {"nvidia.com/gpu": 2})]
    ssn = session(arguments, nodes)
    plugin = next(p for p in ssn.plugins.predicate.flat if isinstance(p, ResourceStrategyFit))
    manifest = pod("t1", cpu, memory, nvidia_com_gpu=gpus) if gpus else pod("t1", cpu, memory)
    rows = np.array([ssn.table.row(node)], np.int64)
    verdict = plugin.predicate(task_from_pod(manifest, P), rows, ssn)
    assert bool(verdict.passed[0]) is passes
    if not passes:
        assert [reason for reason, _ in verdict.reasons] == ["proportional of resource nvidia.com/gpu check failed"]


@pytest.mark.parametrize(
    ("foo_weight", "pods", "nodes", "expected"),
    [
        (
            1,
            [
                pod("p1", "1", "1Gi", example_com_foo="2"),
                pod("p2", "1", "1Gi", example_com_foo="3"),
                pod("p3", "1", "10Gi", nvidia_com_gpu="2"),
                pod("p4", "1", "1Gi", nvidia_com_gpu="3"),
            ],
            [
                ("n1", 4000, 4 * GI, {"nvidia.com/gpu": 10}),
                ("n2", 4000, 4 * GI, {"nvidia.com/gpu": 5}),
                ("n3", 4000, 4 * GI, {"example.com/foo": 10}),
                ("n4", 4000, 4 * GI, {"example.com/foo": 5}),
            ],
            [[0, 0, 800, 600], [0, 0, 700, 400], [200, 400, 0, 0], [300, 600, 0, 0]],
        ),
        (
            2,
            [pod("p5", "1", "1Gi", nvidia_com_gpu="4", example_com_foo="4")],
            [
                ("n5", 4000, 4 * GI, {"nvidia.com/gpu": 10, "example.com/foo": 5}),
                ("n6", 4000, 4 * GI, {"example.com/foo": 10}),
            ],
            [[266.66666666, 399.99999999]],
        ),
    ],
    ids=["four-pods-two-resources", "one-pod-both-resources"],
)
def test_volcanos_plugin_cases(
    foo_weight: int,
    pods: list[dict[str, Any]],
    nodes: list[tuple[str, int, int, dict[str, int]]],
    expected: list[list[float]],
) -> None:
    """TestResourceStrategyFitPlugin: a resource the node has none of scores 0 but keeps its weight."""
    arguments = {
        "resourceStrategyFitWeight": 10,
        "resources": {
            "nvidia.com/gpu": {"type": MOST, "weight": 1},
            "example.com/foo": {"type": LEAST, "weight": foo_weight},
        },
    }
    ssn = session(arguments, nodes)
    for manifest, want in zip(pods, expected, strict=True):
        got = scores(ssn, manifest, [n[0] for n in nodes])
        assert got == [pytest.approx(w, abs=1e-6) for w in want], manifest["metadata"]["name"]


def test_the_kits_gpu_resources_are_scored_as_gpu_compute() -> None:
    """A conf naming the protocol's GPU resource scores the kit's GPU pods by the node's GPU compute, as
    `binpack` reads it: MostAllocated prefers the node whose GPUs are busier."""
    gpu = P.resources.gpu
    arguments = {"resourceStrategyFitWeight": 1, "resources": {gpu: {"type": MOST, "weight": 1}}}
    entries = []
    for name in ("busy", "idle"):
        meta = NodeMeta(NodeName(name), {}, (), False, "T4", True)
        entries.append((NodeInventory.simulated(name, "T4", 2, 16384), NodeCapacity(64000, 1 << 40, 110), meta))
    plugin = f"  - name: resource-strategy-fit\n    arguments: {json.dumps(arguments)}\n"
    ssn = Framework(
        parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n{plugin}'), builtin_registry(), BuildContext()
    ).open_session(StaticCache(entries))
    ssn.table.gpu_sum[ssn.table.row("busy")] = 1000  # one of its two GPUs is taken
    manifest = pod("p", "1", "1Gi")
    manifest["spec"]["containers"][0]["resources"] = {"limits": {gpu: "1"}}
    busy, idle = scores(ssn, manifest, ["busy", "idle"])
    assert (busy, idle) == (pytest.approx(100.0), pytest.approx(50.0))  # (1000 + 1000) / 2000, then 1000 / 2000
