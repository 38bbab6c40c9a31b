"""Scheduler scenarios as data: nodes, jobs and queues in; which tasks bind where out. One harness
runs them through the real framework, actions and plugins (on a StaticCache)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runtimekit.model import NodeCapacity, NodeInventory, NodeName, PodKey, PodRequest
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import (
    Constraints,
    JobInfo,
    JobKey,
    NodeMeta,
    QueueInfo,
    Resources,
    Taint,
    TaskInfo,
    Toleration,
)
from scheduler.helpers import cpu_only, share, whole

FULL = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: gpushare
    arguments: {gpushare.policy: bestfit}
"""


@dataclass
class Node:
    name: str
    gpus: int = 1
    model: str = "T4"
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass
class Job:
    name: str
    tasks: list[PodRequest]
    min_member: int = 1
    queue: str = "default"
    priority: int = 0
    constraints: Constraints = field(default_factory=Constraints)
    models: frozenset[str] | None = None


@dataclass
class Scenario:
    id: str
    nodes: list[Node]
    jobs: list[Job]
    bound: dict[str, str | None]  # task -> node (None: any node); every other task stays pending
    queues: list[QueueInfo] = field(default_factory=list)
    sessions: int = 1
    conf: str = FULL


def run(s: Scenario) -> StaticCache:
    entries = [
        (
            NodeInventory.simulated(n.name, n.model, n.gpus, 16384),
            NodeCapacity(64000, 256 << 30, 110),
            NodeMeta(NodeName(n.name), n.labels, n.taints, False, n.model),
        )
        for n in s.nodes
    ]
    cache = StaticCache(entries, s.queues)
    for i, spec in enumerate(s.jobs):
        job = JobInfo(
            JobKey(spec.name),
            "default",
            spec.name,
            queue=spec.queue,
            min_member=spec.min_member,
            priority=spec.priority,
            created=float(i),
        )
        for j, request in enumerate(spec.tasks):
            job.add(
                TaskInfo(
                    PodKey(f"{spec.name}-{j}"),
                    "default",
                    f"{spec.name}-{j}",
                    job.key,
                    request,
                    priority=spec.priority,
                    created=float(i),
                    constraints=spec.constraints,
                    gpu_models=spec.models,
                )
            )
        cache.add_job(job)
    framework = Framework(parse_conf(s.conf), builtin_registry(), BuildContext())
    for _ in range(s.sessions):
        framework.run_once(cache)
    return cache


SCENARIOS = [
    Scenario(
        "gang-all-or-nothing",
        [Node("n1"), Node("n2")],
        [Job("g3", [whole(1)] * 3, min_member=3), Job("g2", [whole(1)] * 2, min_member=2)],
        {"g2-0": None, "g2-1": None},
    ),
    Scenario(
        "gang-of-shares-packs-one-node",
        [Node("n1", gpus=2), Node("n2", gpus=2)],
        [Job("g", [share(500)] * 4, min_member=4)],
        {"g-0": "n1", "g-1": "n1", "g-2": "n1", "g-3": "n1"},
    ),
    Scenario(
        "higher-priority-first",
        [Node("n1")],
        [Job("low", [whole(1)], priority=1), Job("high", [whole(1)], priority=10)],
        {"high-0": "n1"},
    ),
    Scenario(
        "multi-gpu-needs-one-node",
        [Node("n1", gpus=2), Node("n2", gpus=4)],
        [Job("four", [whole(4)]), Job("two", [whole(2)])],
        {"four-0": "n2", "two-0": "n1"},
    ),
    Scenario(
        "node-selector-and-taints",
        [
            Node("plain"),
            Node("labelled", labels={"pool": "a"}),
            Node("tainted", labels={"pool": "a"}, taints=(Taint("dedicated", "x"),)),
        ],
        [
            Job("sel", [share(300)], constraints=Constraints(node_selector=(("pool", "a"),))),
            Job(
                "tol",
                [share(300)],
                constraints=Constraints(
                    node_selector=(("pool", "a"),), tolerations=(Toleration("dedicated", "Equal", "x"),)
                ),
            ),
            Job("none", [share(900)], constraints=Constraints(node_selector=(("pool", "b"),))),
        ],
        {"sel-0": "labelled", "tol-0": None},
    ),
    Scenario(
        "gpu-model-constraint",
        [Node("t4", model="T4"), Node("a10", model="A10")],
        [
            Job("wants-a10", [share(500)], models=frozenset({"A10"})),
            Job("wants-v100", [share(500)], models=frozenset({"V100M16"})),
        ],
        {"wants-a10-0": "a10"},
    ),
    Scenario("cpu-only-pods-are-scheduled-too", [Node("n1", gpus=0)], [Job("cpu", [cpu_only(2000)])], {"cpu-0": "n1"}),
    Scenario("best-effort-goes-to-backfill", [Node("n1")], [Job("be", [PodRequest(0, 0)])], {"be-0": "n1"}),
    Scenario(
        "queue-weights-split-the-cluster",
        [Node(f"n{i}") for i in range(4)],
        [Job(f"a{i}", [whole(1)], queue="a") for i in range(4)]
        + [Job(f"b{i}", [whole(1)], queue="b") for i in range(4)],
        {"a0-0": None, "b0-0": None, "b1-0": None, "b2-0": None},
        queues=[QueueInfo("a", weight=1), QueueInfo("b", weight=3)],
        sessions=4,
    ),
    Scenario(
        "queue-capability-caps",
        [Node(f"n{i}") for i in range(3)],
        [Job(f"c{i}", [whole(1)], queue="capped") for i in range(3)],
        {"c0-0": None},
        queues=[QueueInfo("capped", capability=Resources(64000, 10**6, 1000))],
        sessions=3,
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    cache = run(scenario)
    got = {str(task): str(cache.bound[task].node) for task in cache.bound}
    assert set(got) == set(scenario.bound), got
    for task, node in scenario.bound.items():
        if node is not None:
            assert got[task] == node, (task, got)
    # never over-booked: the cache's ledger equals a recomputation from what was bound
    from runtimekit.model import Ledger

    rebuilt, conflicts = Ledger.rebuild(
        ((cache.ledger.table.inventory(n), cache.ledger.table.capacity(n)) for n in cache.ledger.table.node_names()),
        ((k, p) for k, p in cache.ledger.bookings().items()),
    )
    assert conflicts == []
    for node in cache.ledger.table.node_names():
        assert rebuilt.table.free_gpus(node) == cache.ledger.table.free_gpus(node)


def test_unschedulable_pods_say_why() -> None:
    cache = run(SCENARIOS[4])
    # kube-scheduler runs TaintToleration before NodeAffinity: the tainted node says so
    assert cache.unschedulable[PodKey("none-0")].message == (
        "0/3 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s)."
    )


def test_the_volcano_default_conf_loads_unchanged() -> None:
    conf = parse_conf("""
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
""")
    framework = Framework(conf, builtin_registry())
    assert [p.name for p in framework.plugins.every.flat] == [
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ]
    assert [p.name for p in framework.plugins.preemptable.flat] == ["priority", "conformance"]


@pytest.mark.parametrize(
    ("nodes", "tasks", "expected"),
    [
        pytest.param(
            [Node("a", 8), Node("b", 8), Node("c", 8), Node("d", 4)],
            [whole(8)] * 5,
            "gang: 3/5 tasks placed; 2 need 8 whole GPUs each, largest free block 4",
            id="whole GPUs",
        ),
        pytest.param(
            [Node("a", 1)],
            [share(600), share(600)],
            "gang: 1/2 tasks placed; 1 needs 60% of a GPU, most free on one GPU 40%",
            id="shares",
        ),
    ],
)
def test_every_member_of_an_unschedulable_gang_is_told_the_real_shortfall(
    nodes: list[Node], tasks: list[PodRequest], expected: str
) -> None:
    cache = run(Scenario("gang", nodes, [Job("g", tasks, min_member=len(tasks))], {}))
    assert not cache.bound
    assert sorted(cache.unschedulable) == [f"g-{i}" for i in range(len(tasks))]
    assert {errors.message for errors in cache.unschedulable.values()} == {expected}
