"""`capacity` against the cases of Volcano's capacity plugin tests (written here as data): allocation
within capability, deserved-based reclaim on the dimensions that matter, queue priority, guarantee,
and hierarchical queues."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.plugins.policy_cases import (
    Group,
    Node,
    Pod,
    Queue,
    amounts,
    bound,
    build_cache,
    evicted,
    pipelined,
    run,
)

FLAT = """
actions: "allocate, reclaim"
tiers:
- plugins:
  - name: capacity
  - name: predicates
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
"""
A100, GPU = "nvidia.com/A100", "nvidia.com/gpu"


def r(cpu: str = "", memory: str = "") -> dict[str, object]:
    return amounts(cpu, memory)


@dataclass
class Case:
    nodes: list[Node]
    pods: list[Pod]
    groups: list[Group]
    queues: list[Queue]
    bound: dict[str, str] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    pipelined: dict[str, list[str]] = field(default_factory=dict)


N1 = Node("n1", "2", "4Gi", labels={"selector": "worker"})
N2 = Node("n2", "2", "4Gi")
N3 = Node("n3", "2", "4Gi", {A100: 10}, {"selector": "worker"})
N4 = Node("n4", "2", "4Gi", {A100: 10})
N7 = Node("n7", "4", "8Gi", {GPU: 4})
N8 = Node("n8", "4", "8Gi", {GPU: 1})

CASES = [
    pytest.param(
        Case(
            [N1, N2],
            [Pod("p1", "pg1", "1", "1Gi", node="n1"), Pod("p2", "pg2", "1", "1Gi", selector={"selector": "worker"})],
            [Group("pg1", "q1", "Running"), Group("pg2", "q1")],
            [Queue("q1", capability=r("2", "2Gi"))],
            bound={"p2": "n1"},
        ),
        id="case0: allocatable while the queue is within its capability",
    ),
    pytest.param(
        Case(
            [N1, N2],
            [Pod("p3", "pg3", "1", "1Gi", node="n1"), Pod("p4", "pg4", "1", "1Gi")],
            [Group("pg3", "q2", "Running"), Group("pg4", "q2")],
            [Queue("q2", capability=r("1.5", "1.5Gi"))],
        ),
        id="case1: not allocatable beyond the queue's capability",
    ),
    pytest.param(
        Case(
            [N1, N2],
            [
                Pod("p5", "pg5", "2", "4Gi", node="n1", preemptable=False),
                Pod("p6", "pg5", "2", "4Gi", node="n2"),
                Pod("p7", "pg6", "2", "4Gi"),
            ],
            [Group("pg5", "q3", "Running"), Group("pg6", "q4")],
            [Queue("q3", deserved=r("2", "4Gi")), Queue("q4", deserved=r("2", "4Gi"))],
            evicted=["p6"],
            pipelined={"ns1/pg6": ["n2"]},
        ),
        id="case2: reclaim from another queue while allocated is below deserved",
    ),
    pytest.param(
        Case(
            [N3, N4],
            [
                Pod("p8", "pg7", scalars={A100: 10}, node="n3", preemptable=False),
                Pod("p9", "pg7", scalars={A100: 10}, node="n4"),
                Pod("p10", "pg8", "2", "4Gi", node="n3"),
                Pod("p11", "pg8", "2", "4Gi", node="n4"),
                Pod("p12", "pg9", scalars={A100: 10}),
            ],
            [Group("pg7", "q5", "Running"), Group("pg8", "q6", "Running"), Group("pg9", "q6")],
            [Queue("q5", r("2", "4Gi") | {A100: 10}), Queue("q6", r("2", "4Gi") | {A100: 10})],
            evicted=["p9"],
            pipelined={"ns1/pg9": ["n4"]},
        ),
        id="case3: cpu and memory overused, the scalar not: a scalar-only pod reclaims",
    ),
    pytest.param(
        Case(
            [Node("n5", "2", "4Gi"), Node("n6", "2", "4Gi")],
            [Pod("p13", "pg10", "2", "4Gi", node="n5"), Pod("p14", "pg11", "2", "4Gi"), Pod("p15", "pg12", "2", "4Gi")],
            [Group("pg10", "q7", "Running"), Group("pg11", "q8"), Group("pg12", "q9")],
            [
                Queue("q7", capability=r("2", "4Gi"), priority=5),
                Queue("q8", capability=r("2", "4Gi"), priority=1),
                Queue("q9", capability=r("2", "4Gi"), priority=10),
            ],
            bound={"p15": "n6"},
        ),
        id="case4: queues in priority order",
    ),
    pytest.param(
        Case(
            [N1],
            [
                Pod("p16", "pg16", "1", "3Gi", node="n1"),
                Pod("p17", "pg17", "1", "1Gi"),
                Pod("p18", "pg18", "1", "1Gi", node="n1"),
            ],
            [Group("pg16", "q10", "Running"), Group("pg17", "q10"), Group("pg18", "q11", "Running")],
            [Queue("q10", r("2", "2Gi"), r("4", "4Gi")), Queue("q11", r("0", "0Gi"), r("2", "2Gi"))],
            evicted=["p18"],
            pipelined={"ns1/pg17": ["n1"]},
        ),
        id="case5: reclaim when allocated plus the request stays within deserved on one dimension",
    ),
    pytest.param(
        Case(
            [N1],
            [
                Pod("p19", "pg19", "1", "1Gi", node="n1"),
                Pod("p20", "pg20", "1", "2Gi"),
                Pod("p21", "pg21", "1", "1Gi", node="n1"),
            ],
            [Group("pg19", "q12", "Running"), Group("pg20", "q12"), Group("pg21", "q13", "Running")],
            [Queue("q12", r("1", "2Gi"), r("4", "4Gi")), Queue("q13", r("0", "0Gi"), r("2", "2Gi"))],
        ),
        id="case6: no reclaim when allocated plus the request exceeds deserved",
    ),
    pytest.param(
        Case(
            [N7],
            [
                Pod("p22", "pg22", "2", "4Gi", node="n7"),
                Pod("p23", "pg23", scalars={GPU: 1}, node="n7"),
                Pod("p24", "pg24", "2", "1Gi", {GPU: 1}, node="n7"),
                Pod("p25", "pg25", "2", "3Gi", {GPU: 1}),
            ],
            [
                Group("pg22", "queue14", "Running"),
                Group("pg23", "queue15", "Running"),
                Group("pg24", "queue16", "Running"),
                Group("pg25", "queue16"),
            ],
            [Queue("queue14", r("2", "4Gi") | {GPU: 2}), Queue("queue15"), Queue("queue16", r("2", "4Gi") | {GPU: 2})],
        ),
        id="case7: what a queue holds lacks the GPUs it deserves: nothing reclaimed",
    ),
    pytest.param(
        Case(
            [N8],
            [
                Pod("p26", "pg26", "0", "4Gi", node="n8"),
                Pod("p27", "pg27", "1", "0Gi", node="n8"),
                Pod("p28", "pg28", scalars={GPU: 1}, node="n8"),
                Pod("p29", "pg29", "2", "4Gi", node="n8"),
                Pod("p30", "pg30", "1", "0Gi", {GPU: 1}),
            ],
            [
                Group("pg26", "queue17", "Running"),
                Group("pg27", "queue17", "Running"),
                Group("pg28", "queue17", "Running"),
                Group("pg29", "queue18", "Running"),
                Group("pg30", "queue18"),
            ],
            [Queue("queue17", r("2", "2Gi")), Queue("queue18", r("2", "4Gi") | {GPU: 1})],
            evicted=["p28"],
            pipelined={"ns1/pg30": ["n8"]},
        ),
        id="case8: victims only on the dimensions the reclaimer asks for",
    ),
    pytest.param(
        Case(
            [N8],
            [Pod("p31", "pg31", "4", "4Gi", {GPU: 1}, node="n8"), Pod("p32", "pg32", "1", "1Gi")],
            [Group("pg31", "queue19", "Running"), Group("pg32", "queue20")],
            [Queue("queue19", r() | {GPU: 1}), Queue("queue20", r("2", "2Gi"))],
        ),
        id="case9: a GPU-only queue within its deserved GPUs keeps its pod",
    ),
    pytest.param(
        Case(
            [Node("n9", "8", "100Gi"), Node("n10", "8", "100Gi")],
            [
                Pod("p33", "pg33", "7", "90Gi", node="n9"),
                Pod("p34", "pg34", "2", "5Gi"),
                Pod("p35", "pg35", "2", "5Gi", node="n10"),
            ],
            [Group("pg33", "queue21", "Running"), Group("pg34", "queue21"), Group("pg35", "queue22", "Running")],
            [Queue("queue21", r("8", "100Gi"), r("8", "100Gi")), Queue("queue22", None, r("2", "5Gi"))],
        ),
        id="case10: no reclaim beyond the queue's capability",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_capacity_cases(case: Case) -> None:
    cache = build_cache(case.nodes, case.pods, case.groups, case.queues)
    ssn = run(FLAT, cache)
    assert {k: v for k, v in bound(cache).items() if k not in {p.name for p in case.pods if p.node}} == case.bound
    assert evicted(cache) == case.evicted
    assert pipelined(ssn) == case.pipelined


ENQUEUE = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: capacity
"""
M = Node("n1", "3", "3G"), Node("n2", "3", "3G")
RUNNING = [Pod("pod1", "pg1", "1", "3G", node="n1"), Pod("pod2", "pg2", "3", "1G", node="n2")]
RUNNING_GROUPS = [
    Group("pg1", "q1", "Running", min_resources=r("1", "3G")),
    Group("pg2", "q2", "Running", min_resources=r("3", "1G")),
]
QUEUES = [Queue("q1", r("2", "2G"), r("2", "2G")), Queue("q2", r("2", "2G"), r("3", "3G"))]


@pytest.mark.parametrize(
    ("pod", "group", "expected"),
    [
        pytest.param(
            Pod("pod3", "pg3", "1", "0G"),
            Group("pg3", "q1", "Pending", min_resources=r("1", "0G")),
            {"pod3": "n1"},
            id="memory above deserved: a pod asking only cpu is admitted and placed",
        ),
        pytest.param(
            Pod("pod4", "pg4", "0", "1G"),
            Group("pg4", "q2", "Pending", min_resources=r("0", "1G")),
            {"pod4": "n2"},
            id="cpu above deserved: a pod asking only memory is admitted and placed",
        ),
        pytest.param(
            Pod("pod5", "pg5", "1", "1G"),
            Group("pg5", "q1", "Pending", min_resources=r("1", "1G")),
            {},
            id="beyond the capability: not admitted",
        ),
    ],
)
def test_enqueue_and_allocate_within_the_real_capability(pod: Pod, group: Group, expected: dict[str, str]) -> None:
    cache = build_cache(list(M), [*RUNNING, pod], [*RUNNING_GROUPS, group], QUEUES)
    run(ENQUEUE, cache)
    assert bound(cache) == expected


def test_a_closed_queue_admits_nothing() -> None:
    closed = Queue("q3", capability=r("3", "3G"))
    cache = build_cache(
        list(M), [Pod("pod6", "pg6", "1", "1G")], [Group("pg6", "q3", "Pending", min_resources=r("1", "1G"))], [closed]
    )
    cache.queues["q3"].state = "Closed"
    ssn = run(ENQUEUE, cache)
    assert bound(cache) == {}
    assert ssn.jobs[next(iter(ssn.jobs))].phase == "Pending"


def test_a_victim_is_kept_when_its_queue_would_fall_below_its_guarantee() -> None:
    """Volcano's guarantee check: without the victim its queue must still hold its guarantee."""
    nodes = [Node("n1", "2", "4Gi"), Node("n2", "2", "4Gi")]
    pods = [Pod("a", "ga", "2", "4Gi", node="n1"), Pod("b", "ga", "2", "4Gi", node="n2"), Pod("c", "gc", "2", "4Gi")]
    groups = [Group("ga", "qa", "Running"), Group("gc", "qc")]
    guarded = [Queue("qa", r("2", "4Gi"), guarantee=r("4", "8Gi")), Queue("qc", r("2", "4Gi"))]
    cache = build_cache(nodes, pods, groups, guarded)
    run(FLAT, cache)
    assert evicted(cache) == []
    cache = build_cache(nodes, pods, groups, [Queue("qa", r("2", "4Gi"), guarantee=r("2", "4Gi")), guarded[1]])
    run(FLAT, cache)
    assert len(evicted(cache)) == 1


TREE = """
actions: "enqueue, reclaim, allocate"
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
  - name: predicates
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
"""
BIG = Node("n1", "8", "8Gi")
ROOT = Queue("root")
Q3, Q4 = (
    Queue("q3", r("4", "4Gi"), r("4", "4Gi"), parent="root"),
    Queue("q4", r("2", "2Gi"), r("4", "4Gi"), parent="root"),
)
Q31, Q32 = (
    Queue("q31", r("2", "2Gi"), r("4", "4Gi"), parent="q3"),
    Queue("q32", r("2", "2Gi"), r("4", "4Gi"), parent="q3"),
)
Q33 = Queue("q33", r("0", "0Gi"), r("4", "4Gi"), parent="q3")
Q1, Q11, Q12 = (
    Queue("q1", capability=r("4", "4Gi"), parent="root"),
    Queue("q11", capability=r("1", "1Gi"), parent="q1"),
    Queue("q12", capability=r("3", "3Gi"), parent="q1"),
)

TREE_CASES = [
    pytest.param(
        Case([BIG], [Pod("p1", "pg1", "1", "1Gi")], [Group("pg1", "q11")], [ROOT, Q1, Q11, Q12], bound={"p1": "n1"}),
        id="case0: a leaf queue's pod is placed",
    ),
    pytest.param(
        Case([BIG], [Pod("p2", "pg2", "1", "1Gi")], [Group("pg2", "q1", "Pending")], [ROOT, Q1, Q11, Q12]),
        id="case1: a queue with children runs nothing",
    ),
    pytest.param(
        Case(
            [BIG],
            [Pod("p3", "pg3", "2", "2Gi"), Pod("p4", "pg3", "2", "2Gi")],
            [Group("pg3", "q31", min_member=2)],
            [ROOT, Q3, Q4, Q31, Q32],
            bound={"p3": "n1", "p4": "n1"},
        ),
        id="case2: within the capability of the queue and its ancestors",
    ),
    pytest.param(
        Case(
            [BIG],
            [
                Pod("p5", "pg4", "4", "4Gi", node="n1"),
                Pod("p6", "pg5", "2", "2Gi", node="n1", preemptable=False),
                Pod("p7", "pg5", "2", "2Gi", node="n1"),
                Pod("p8", "pg6", "2", "2Gi"),
            ],
            [Group("pg4", "q4", "Running"), Group("pg5", "q31", "Running"), Group("pg6", "q32")],
            [ROOT, Q3, Q31, Q32, Q4],
            evicted=["p7"],
            pipelined={"ns1/pg6": ["n1"]},
        ),
        id="case3: reclaim from a sibling above its deserved share",
    ),
    pytest.param(
        Case(
            [BIG],
            [
                Pod("p6", "pg5", "2", "2Gi", node="n1", preemptable=False),
                Pod("p9", "pg7", "2", "2Gi", node="n1"),
                Pod("p10", "pg8", "3", "3Gi"),
            ],
            [Group("pg5", "q31", "Running"), Group("pg7", "q32", "Running"), Group("pg8", "q33")],
            [ROOT, Q3, Q31, Q32, Q33],
        ),
        id="case4: an ancestor without room keeps the pod out",
    ),
    pytest.param(
        Case(
            [BIG],
            [Pod("p11", "pg9", "1", "0")],
            [Group("pg9", "q51", "Running")],
            [
                ROOT,
                Queue("q5", capability=r("", "4Gi"), parent="root"),
                Queue("q51", capability=r("", "2Gi"), parent="q5"),
            ],
            bound={"p11": "n1"},
        ),
        id="case5: an unset cpu capability is inherited from the parent",
    ),
]


@pytest.mark.parametrize("case", TREE_CASES)
def test_hierarchical_capacity_cases(case: Case) -> None:
    cache = build_cache(case.nodes, case.pods, case.groups, case.queues)
    ssn = run(TREE, cache)
    assert bound(cache) == case.bound
    assert evicted(cache) == case.evicted
    assert pipelined(ssn) == case.pipelined


def test_a_pod_group_is_not_admitted_when_an_ancestor_has_no_room() -> None:
    """Volcano's case 6: children without a capability inherit the parent's; the second group finds
    the parent full."""
    queues = [
        ROOT,
        Queue("q6", capability=r("2", "4Gi"), parent="root"),
        Queue("q61", parent="q6"),
        Queue("q62", parent="q6"),
    ]
    groups = [
        Group("pg10", "q61", "Pending", min_resources=r("2", "4Gi")),
        Group("pg11", "q62", "Pending", min_resources=r("2", "4Gi")),
    ]
    ssn = run(TREE, build_cache([BIG], [], groups, queues))
    assert {job.name: job.phase for job in ssn.jobs.values()} == {"pg10": "Inqueue", "pg11": "Pending"}


def test_a_cycle_of_parents_admits_nothing() -> None:
    queues = [ROOT, Queue("a", parent="b"), Queue("b", parent="a")]
    cache = build_cache([BIG], [Pod("p", "g", "1", "1Gi")], [Group("g", "a")], queues)
    run(TREE, cache)
    assert bound(cache) == {}


ANCESTOR_LEVEL_1 = """
actions: "enqueue, reclaim, allocate"
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: 1
  - name: predicates
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
  - name: priority
"""
A100L, HCA = "nvidia.com/a100", "rdma/hca"


def a100(count: int) -> dict[str, object]:
    return {"cpu": "", "memory": "", A100L: count}


def test_reclaim_takes_the_victim_of_the_nearest_relative_queue_first() -> None:
    """Volcano's Test_capacityPlugin_AncestorReclaimScenarios "case3: Cross-parent reclaim can evict
    sibling-queue victim first": p6 (project2_non-preemptable) may take from its sibling queue's pods
    (priority 2) and from its cousin's p5 (priority 0, project1_preemptable); the sibling's go first,
    the newest of them (p3)."""
    node = Node("n1", "16", "16Gi", {A100L: 4, HCA: 1001})
    queues = [
        Queue("root", {"cpu": "16", "memory": "16Gi", A100L: 4, "rdma": 1000}),
        Queue("project1_root", a100(1), a100(2), parent="root"),
        Queue("project1_non-preemptable", a100(1), a100(1), parent="project1_root"),
        Queue("project1_preemptable", parent="project1_root"),
        Queue("project2_root", a100(3), a100(4), parent="root"),
        Queue("project2_non-preemptable", a100(3), a100(3), parent="project2_root"),
        Queue("project2_preemptable", parent="project2_root"),
    ]
    one = {A100L: 1, HCA: 1}
    pods = [
        *(Pod(f"p{i}", f"pg{i}", "1", "1Gi", one, node="n1", priority=2) for i in (1, 2, 3)),
        Pod("p4", "pg4_reclaimed", "1", "1Gi", one),
        Pod("p5", "pg5_pipelined", "1", "1Gi", one, node="n1"),
        Pod("p6", "pg6", "1", "1Gi", one),
    ]
    groups = [
        *(Group(f"pg{i}", "project2_preemptable", "Running") for i in (1, 2, 3)),
        Group("pg4_reclaimed", "project2_preemptable"),
        Group("pg5_pipelined", "project1_preemptable", "Running"),
        Group("pg6", "project2_non-preemptable", "Pending"),
    ]
    cache = build_cache([node], pods, groups, queues)
    ssn = run(ANCESTOR_LEVEL_1, cache)
    assert evicted(cache) == ["p3"]
    assert pipelined(ssn) == {"ns1/pg6": ["n1"]}


def test_a_sibling_queues_victim_goes_before_a_lower_priority_cousins() -> None:
    """Both a1's sibling a2 and its cousin b1 hold beyond their deserved share: a2's pods go first though
    b1's have the lower priority (Volcano's capacity VictimQueueOrder: the deepest common ancestor)."""
    queues = [
        Queue("root"),
        Queue("a", r("2", "2Gi"), parent="root"),
        Queue("a1", r("2", "2Gi"), parent="a"),
        Queue("a2", r("0", "0"), parent="a"),
        Queue("b", r("2", "2Gi"), parent="root"),
        Queue("b1", r("0", "0"), parent="b"),
    ]
    pods = [
        Pod("sibling-old", "pa2", "1", "1Gi", node="n1", priority=2),
        Pod("sibling-new", "pa2", "1", "1Gi", node="n1", priority=2),
        Pod("cousin-old", "pb1", "1", "1Gi", node="n1"),
        Pod("cousin-new", "pb1", "1", "1Gi", node="n1"),
        Pod("reclaimer", "pa1", "1", "1Gi"),
    ]
    groups = [Group("pa2", "a2", "Running"), Group("pb1", "b1", "Running"), Group("pa1", "a1")]
    cache = build_cache([Node("n1", "4", "4Gi")], pods, groups, queues)
    ssn = run(TREE, cache)
    assert evicted(cache) == ["sibling-new"]
    assert pipelined(ssn) == {"ns1/pa1": ["n1"]}
