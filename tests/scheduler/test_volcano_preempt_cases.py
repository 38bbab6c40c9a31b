"""Rows of Volcano's `TestPreempt` (pkg/scheduler/actions/preempt/preempt_test.go) on the live cache:
a job's priority is its PodGroup's PriorityClass (not its pods'), and `volcano.sh/preemptable` is
read from the annotation, then the label, as Volcano's `GetPodPreemptable` reads it."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.cache.objects import preemptable
from scheduler.volcano_cases import (
    Case,
    build_node,
    build_pod,
    build_pod_group,
    build_priority_class,
    build_queue,
    run,
)

# The plugins of TestPreempt (conformance, gang, priority, proportion) and its one action.
PREEMPT = """
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: proportion
"""
PREEMPTABLE = "volcano.sh/preemptable"
CLASSES = [build_priority_class("high-priority", 100000), build_priority_class("low-priority", 10)]


def yes(value: str) -> dict[str, str]:
    return {PREEMPTABLE: value}


CASES = [
    Case(
        "preempt one task of different job to fit both jobs on one node",
        PREEMPT,
        nodes=[build_node("n1", "2", "2G")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, {"": 2}, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q1", 1, {"": 2}, priority_class="high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1", labels=yes("false")),
            build_pod("c1", "preemptor1", "", "1", "1G", "pg2"),
            build_pod("c1", "preemptor2", "", "1", "1G", "pg2"),
        ],
        queues=[build_queue("q1")],
        classes=CLASSES,
    ),
    Case(
        "preempt enough tasks to fit large task of different job",
        PREEMPT,
        nodes=[build_node("n1", "6", "6G")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, {"": 3}, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee3", "n1", "1", "1G", "pg1", labels=yes("false")),
            build_pod("c1", "preemptor1", "", "5", "5G", "pg2"),
        ],
        queues=[build_queue("q1")],
        classes=CLASSES,
    ),
    Case(
        "preempt low priority job in same queue but not pod with preemptable=false or higher priority",
        PREEMPT,
        nodes=[build_node("n1", "12", "12G")],
        groups=[
            build_pod_group("pg1", "c1", "q1", 1, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority"),
        ],
        pods=[
            build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("false")),
            build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee3", "n1", "1", "1G", "pg1", labels=yes("true"), priority=100000),
            build_pod("c1", "preemptor1", "", "1", "1G", "pg2"),
        ],
        queues=[build_queue("q1", capability={"cpu": "3", "memory": "3G"})],
        classes=CLASSES,
    ),
]


def same_queue(name: str, capability: str, pods: list[dict[str, object]], nodes: list[dict[str, object]]) -> Case:
    """The rows about a queue's capability: pg1 and pg3 low, pg2 (the preemptor's) high, all in q1."""
    return Case(
        name,
        PREEMPT,
        nodes=nodes,
        groups=[
            build_pod_group("pg1", "c1", "q1", 0, priority_class="low-priority"),
            build_pod_group("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority"),
            build_pod_group("pg3", "c1", "q1", 0, priority_class="low-priority"),
        ],
        pods=pods,
        queues=[build_queue("q1", capability={"cpu": capability, "memory": f"{capability}G"})],
        classes=CLASSES,
    )


# the preemptor fits the node but not its queue's capability until victims of that queue go (#3161)
CAPABILITY_CASES = [
    same_queue(
        "preempt low priority job in same queue",
        "4",
        [
            build_pod("c1", "preemptee1", "n1", "3", "3G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "3", "3G", "pg2"),
        ],
        [build_node("n1", "12", "12G")],
    ),
    same_queue(
        "preempt low priority job in same queue: allocatable and has enough resource, don't preempt",
        "6",
        [
            build_pod("c1", "preemptee1", "n1", "3", "3G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "3", "3G", "pg2"),
        ],
        [build_node("n1", "12", "12G")],
    ),
    same_queue(
        "rollback evictions when preemptor exceeds queue capacity after evicting victims",
        "3",
        [
            build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "4", "4G", "pg2"),
        ],
        [build_node("n1", "10", "10G")],
    ),
    same_queue(
        "only commit evictions on the node where preemption succeeds",
        "6",
        [
            build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
            build_pod("c1", "preemptee2", "n2", "4", "4G", "pg3", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "3", "3G", "pg2"),
        ],
        [build_node("n1", "3", "3G"), build_node("n2", "4", "4G")],
    ),
]
CASES += CAPABILITY_CASES
# Volcano's ExpectEvicted of each row.
EXPECTED = {
    CASES[0].name: ["c1/preemptee1"],
    CASES[1].name: ["c1/preemptee1", "c1/preemptee2"],
    CASES[2].name: ["c1/preemptee2"],
    CAPABILITY_CASES[0].name: ["c1/preemptee1"],
    CAPABILITY_CASES[1].name: [],
    CAPABILITY_CASES[2].name: [],
    CAPABILITY_CASES[3].name: ["c1/preemptee2"],
}


# memory is counted in bytes: 3G + 3G (decimal) make exactly the 6G capability, as in Volcano
ROWS = [pytest.param(c, id=c.name) for c in CASES]


@pytest.mark.parametrize("case", ROWS)
def test_volcanos_preempt_rows_evict_what_volcano_evicts(case: Case) -> None:
    api, _ = run(case)
    assert sorted(api.evicted) == EXPECTED[case.name]


def test_a_preemptor_that_fits_its_node_and_its_queue_evicts_nothing() -> None:
    """The row above in binary units (no rounding): the preemptor fits the node and, beside the
    running pod, its queue's capability, so it is pipelined with no eviction, as in Volcano."""
    case = same_queue(
        "fits already",
        "6",
        [
            build_pod("c1", "preemptee1", "n1", "3", "3Gi", "pg1", labels=yes("true")),
            build_pod("c1", "preemptor1", "", "3", "3Gi", "pg2"),
        ],
        [build_node("n1", "12", "12Gi")],
    )
    case.queues = [build_queue("q1", capability={"cpu": "6", "memory": "6Gi"})]
    api, _ = run(case)
    assert api.evicted == []


def test_a_podgroups_priority_class_outranks_its_pods_priorities() -> None:
    """The pods say the opposite of their PodGroups (the running pod high, the pending one low):
    Volcano goes by the PodGroups, so the pending job preempts."""
    case = Case(
        "podgroup priority over pod priority",
        PREEMPT,
        nodes=[build_node("n1", "1", "1G")],
        groups=[
            build_pod_group("low", "c1", "q1", 1, priority_class="low-priority"),
            build_pod_group("high", "c1", "q1", 1, priority_class="high-priority"),
        ],
        pods=[
            build_pod("c1", "running", "n1", "1", "1G", "low", priority=100000),
            build_pod("c1", "waiting", "", "1", "1G", "high", priority=10),
        ],
        queues=[build_queue("q1")],
        classes=CLASSES,
    )
    api, _ = run(case)
    assert api.evicted == ["c1/running"]


def test_a_podgroup_naming_no_class_takes_the_global_default() -> None:
    classes = [*CLASSES, build_priority_class("everyone", 500, global_default=True)]
    case = Case(
        "global default",
        PREEMPT,
        nodes=[build_node("n1", "1", "1G")],
        groups=[
            build_pod_group("low", "c1", "q1", 1, priority_class="low-priority"),
            build_pod_group("plain", "c1", "q1", 1),
        ],
        pods=[build_pod("c1", "running", "n1", "1", "1G", "low"), build_pod("c1", "waiting", "", "1", "1G", "plain")],
        queues=[build_queue("q1")],
        classes=classes,
    )
    api, live = run(case)
    assert api.evicted == ["c1/running"]  # 500 (the default) over 10
    live.cache.on_priority_class("DELETED", classes[-1])
    assert live.cache.priorities.job_priority("") == 0


@pytest.mark.parametrize(
    ("annotation", "label", "expected"),
    [
        (None, None, True),
        (None, "false", False),
        (None, "true", True),
        ("true", "false", True),  # the annotation first
        ("false", "true", False),
        ("0", None, False),  # Go's ParseBool: 1, t, T, TRUE, true, True and their false forms
        ("F", None, False),
        ("T", None, True),
        ("yes", None, False),  # unreadable: not preemptable
        (None, "nope", False),
    ],
)
def test_preemptable_is_read_as_volcano_reads_it(annotation: str | None, label: str | None, expected: bool) -> None:
    annotations = {PREEMPTABLE: annotation} if annotation is not None else {}
    labels = {PREEMPTABLE: label} if label is not None else {}
    assert preemptable(annotations, labels) is expected
