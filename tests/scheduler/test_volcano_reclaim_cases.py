"""Rows of Volcano's `TestReclaim` (pkg/scheduler/actions/reclaim/reclaim_test.go) on the live cache:
a queue reclaims from one above its deserved share only while its own pods fit in its share and it
is Open (proportion's and capacity's Preemptive), and takes nothing when idle room already fits."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_priority_class, build_queue, run

PREEMPTABLE = "volcano.sh/preemptable"
CLASSES = [
    build_priority_class("low-priority", 100),
    build_priority_class("mid-priority", 500),
    build_priority_class("high-priority", 1000),
]


def conf(queue_plugin: str, priority: bool = False) -> str:
    """TestReclaim's tiers: conformance, gang, the row's queue plugin (and priority where it has it)."""
    plugins = ["conformance", "gang", queue_plugin, *(["priority"] if priority else [])]
    return 'actions: "reclaim"\ntiers:\n- plugins:\n' + "".join(f"  - name: {p}\n" for p in plugins)


def yes(value: str) -> dict[str, str]:
    return {PREEMPTABLE: value}


def closed(queue: dict[str, Any]) -> dict[str, Any]:
    """Volcano's `BuildQueueWithState(..., QueueStateClosed)`."""
    return {**queue, "status": {"state": "Closed"}}


def three_on_n1(group: str) -> list[dict[str, Any]]:
    return [
        build_pod("c1", "preemptee1", "n1", "1", "1G", group, labels=yes("false")),
        build_pod("c1", "preemptee2", "n1", "1", "1G", group, labels=yes("true")),
        build_pod("c1", "preemptee3", "n1", "1", "1G", group, labels=yes("false")),
    ]


def not_open(plugin: str) -> Case:
    return Case(
        f"can not reclaim resources when queue is not open({plugin} plugin)",
        conf(plugin),
        nodes=[build_node("n1", "3", "3Gi", pods="10")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, phase="Running", priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q2", 1, priority_class="high-priority"),
        ],
        pods=[*three_on_n1("pg1"), build_pod("c1", "preemptor1", "", "1", "1G", "pg2")],
        queues=[build_queue("q1"), closed(build_queue("q2"))],
        classes=CLASSES,
    )


CASES = [
    Case(
        "Two Queue with one Queue overusing resource, should reclaim",
        conf("proportion"),
        nodes=[build_node("n1", "3", "3Gi", pods="10")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q2", 1, priority_class="high-priority"),
        ],
        pods=[*three_on_n1("pg1"), build_pod("c1", "preemptor1", "", "1", "1G", "pg2")],
        queues=[build_queue("q1"), build_queue("q2")],
        classes=CLASSES,
    ),
    not_open("proportion"),
    not_open("capacity"),
    Case(
        "Node available resources should be included in reclaimed resources",
        conf("proportion", priority=True),
        nodes=[build_node("n1", "10", "2Gi", pods="10")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 0, phase="Running", priority_class="mid-priority"),
            build_pod_group("pg2", "c1", "q2", 0, phase="Running", priority_class="mid-priority"),
            build_pod_group("pg3", "c1", "q3", 1, priority_class="mid-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1-1", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee2-1", "n1", "1", "1G", "pg2", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "2", "1G", "pg3"),
        ],
        queues=[build_queue("q1", priority=1), build_queue("q2", priority=2), build_queue("q3", 3)],
        classes=CLASSES,
    ),
    Case(
        "only commit evictions on the node where reclaim succeeds",
        conf("proportion"),
        nodes=[build_node("n1", "10", "10G", pods="10")],
        groups=[
            build_pod_group("pg-victim", "c1", "q1", 0, phase="Running", priority_class="low-priority"),
            build_pod_group("pg-preemptor", "c1", "q2", 1, priority_class="low-priority"),
        ],
        pods=[
            build_pod("c1", "victim-n1", "n1", "2", "2G", "pg-victim", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "3", "3G", "pg-preemptor"),
        ],
        queues=[build_queue("q1", 1), build_queue("q2", 9)],
        classes=CLASSES,
    ),
]
# Volcano's ExpectEvicted of each row.
EXPECTED = {
    CASES[0].name: ["c1/preemptee2"],
    CASES[1].name: [],
    CASES[2].name: [],
    CASES[3].name: ["c1/preemptee1-1"],
    CASES[4].name: [],
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_volcanos_reclaim_rows_evict_what_volcano_evicts(case: Case) -> None:
    api, _ = run(case)
    assert sorted(api.evicted) == EXPECTED[case.name]


def test_a_queue_reclaims_only_what_fits_in_its_deserved_share() -> None:
    """Beyond the table, Volcano's proportion Preemptive (`queueAllocatable`): q1 holds 3 CPUs of its 2
    deserved, so its pod is a victim; q2 (2 deserved, 1 held) asks for 2 more, beyond its share, so
    it reclaims nothing, though evicting the victim would make room. (Memory in Gi: decimal units are
    rounded per quantity, issue 32 item 7.)"""
    case = Case(
        "reclaim within the deserved share",
        conf("proportion"),
        nodes=[build_node("n1", "4", "4Gi", pods="10")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, phase="Running", priority_class="low-priority"),
            build_pod_group("pg1b", "c1", "q1", 1, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q2", 1, phase="Running", priority_class="high-priority"),
            build_pod_group("pg2b", "c1", "q2", 1, priority_class="high-priority"),
        ],
        pods=[
            build_pod("c1", "big", "n1", "3", "1Gi", "pg1", labels=yes("true")),
            build_pod("c1", "q1-more", "", "1", "1Gi", "pg1b"),
            build_pod("c1", "small", "n1", "1", "1Gi", "pg2", labels=yes("true")),
            build_pod("c1", "q2-more", "", "2", "1Gi", "pg2b"),
        ],
        queues=[build_queue("q1"), build_queue("q2")],
        classes=CLASSES,
    )
    api, _ = run(case)
    assert api.evicted == []
    # the same pod asking what its share leaves (1 CPU) reclaims
    pods = [*case.pods[:3], build_pod("c1", "q2-more", "", "1", "1Gi", "pg2b")]
    api, _ = run(Case(case.name, case.conf, case.nodes, pods, case.groups, case.queues, case.classes))
    assert api.evicted == ["c1/big"]
