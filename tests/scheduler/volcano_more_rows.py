"""Volcano's scheduler test cases not translated in the per-action table modules, as rows for the
end-to-end runner (live_tables.py): the rest of TestPreempt and TestReclaim, TestEnqueue, the
proportion, priority and overcommit plugins' tables, and allocate's TestFareShareAllocate; and, by
name only, the cases that use what the kit does not have (hyperNode network topology, DRA, shards),
counted apart with the reason. Facts of pkg/scheduler/{actions,plugins}/*/*_test.go (volcano-sh/volcano)."""

from __future__ import annotations

import json
from typing import Any

from runtimekit.scheduler.framework.conf import PLUGIN_FLAGS
from scheduler.live_tables import Outcome, Row
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_priority_class, build_queue

PREEMPTABLE = "volcano.sh/preemptable"
VOLCANO_FLAGS = tuple(f for f in PLUGIN_FLAGS if f != "enableDevice")  # the last is the kit's own


def yes(value: str) -> dict[str, str]:
    return {PREEMPTABLE: value}


def never(pod: dict[str, Any]) -> dict[str, Any]:
    """Volcano's `BuildPodWithPreemptionPolicy(..., PreemptNever)`."""
    pod["spec"]["preemptionPolicy"] = "Never"
    return pod


def best_effort(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod of `v1.ResourceList{}`: no requests at all."""
    for container in pod["spec"]["containers"]:
        container["resources"] = {}
    return pod


def with_class(pc: dict[str, Any], policy: str) -> dict[str, Any]:
    return {**pc, "preemptionPolicy": policy}


def tiers(
    *plugins: str,
    flags: dict[str, dict[str, bool]] | None = None,
    actions: str = "",
    arguments: dict[str, dict[str, Any]] | None = None,
) -> str:
    """A conf of one tier; `flags` per plugin as Volcano's PluginOption sets them, and its `arguments`."""
    lines = [f'actions: "{actions}"', "tiers:", "- plugins:"]
    for name in plugins:
        lines.append(f"  - name: {name}")
        for flag, value in (flags or {}).get(name, {}).items():
            lines.append(f"    {flag}: {str(value).lower()}")
        if (arguments or {}).get(name):
            lines.append(f"    arguments: {json.dumps((arguments or {})[name])}")
    return "\n".join(lines) + "\n"


PREEMPT = tiers("conformance", "gang", "priority", "proportion", actions="preempt")
HIGH_LOW = [build_priority_class("high-priority", 100000), build_priority_class("low-priority", 10)]


def node(name: str, cpu: str, memory: str, pods: str = "10") -> dict[str, Any]:
    return build_node(name, cpu, memory, pods)


def preempt_rows() -> list[Row]:
    t = "volcano/preempt"
    return [
        Row(
            t,
            Case(
                "do not preempt if there are enough idle resources",
                PREEMPT,
                nodes=[node("n1", "10", "10G")],
                groups=[build_pod_group("pg1", "c1", "q1", 3, {"": 3})],
                pods=[
                    build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1"),
                    build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1"),
                    build_pod("c1", "preemptor1", "", "1", "1G", "pg1"),
                ],
                queues=[build_queue("q1")],
                classes=HIGH_LOW,
            ),
            evicted=[],
        ),
        Row(
            t,
            Case(
                "do not preempt if job is pipelined",
                PREEMPT,
                nodes=[node("n1", "3", "3G")],
                groups=[build_pod_group("pg1", "c1", "q1", 1, {"": 2}), build_pod_group("pg2", "c1", "q1", 1, {"": 2})],
                pods=[
                    build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1"),
                    build_pod("c1", "preemptee2", "n1", "1", "1G", "pg1"),
                    build_pod("c1", "preemptee3", "n1", "1", "1G", "pg2"),
                    build_pod("c1", "preemptor2", "", "1", "1G", "pg2"),
                ],
                queues=[build_queue("q1")],
                classes=HIGH_LOW,
            ),
            evicted=[],
        ),
        *(
            Row(
                t,
                Case(
                    name,
                    PREEMPT,
                    nodes=[node("n1", "12", "12G", pods="1")],
                    groups=[
                        build_pod_group("pg1", "c1", "q1", 0, priority_class="low-priority"),
                        build_pod_group("pg2", "c1", "q1", 1, {"": 1}, priority_class="high-priority"),
                    ],
                    pods=[
                        best_effort(build_pod("c1", "preemptee1", "n1", "0", "0", "pg1", labels=yes("true"))),
                        preemptor,
                    ],
                    queues=[build_queue("q1", capability={"cpu": "6", "memory": "6G"})],
                    classes=HIGH_LOW,
                ),
                evicted=["c1/preemptee1"],
            )
            for name, preemptor in (
                (
                    "unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
                    build_pod("c1", "preemptor1", "", "3", "3G", "pg2"),
                ),
                (
                    "BestEffort high-priority pod preempt BestEffort low-priority pod in same queue",
                    best_effort(build_pod("c1", "preemptor1", "", "0", "0", "pg2")),
                ),
            )
        ),
        Row(
            t,
            Case(
                "can not preempt resources when task preemption policy is never",
                PREEMPT,
                nodes=[node("n1", "1", "1Gi", pods="1")],
                groups=[
                    build_pod_group("pg1", "c1", "q1", 0, priority_class="low-priority"),
                    build_pod_group("pg2", "c1", "q1", 1, priority_class="high-priority"),
                ],
                pods=[
                    build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
                    never(build_pod("c1", "preemptor1", "", "1", "1G", "pg2")),
                ],
                queues=[build_queue("q1")],
                classes=HIGH_LOW,
            ),
            evicted=[],
        ),
        Row(
            t,
            Case(
                "multi-queue: preemptorTasks must not be overwritten by intra-job preemption of another queue",
                PREEMPT,
                nodes=[node("n1", "2", "2G")],
                groups=[
                    build_pod_group("pg1", "c1", "q1", 1, {"": 1}),
                    build_pod_group("pg2", "c1", "q2", 0, priority_class="low-priority"),
                    build_pod_group("pg3", "c1", "q2", 1, {"": 1}, priority_class="high-priority"),
                ],
                pods=[
                    build_pod("c1", "q1-runner1", "n1", "1", "1G", "pg1"),
                    build_pod("c1", "q2-preemptee1", "n1", "1", "1G", "pg2", labels=yes("true")),
                    build_pod("c1", "q2-preemptor1", "", "1", "1G", "pg3"),
                ],
                queues=[build_queue("q1"), build_queue("q2", capability={"cpu": "4", "memory": "4G"})],
                classes=HIGH_LOW,
            ),
            evicted=["c1/q2-preemptee1"],
        ),
    ]


# TestReclaim's tier: each plugin with only the flags the test turns on (in Volcano's test harness a
# flag left unset is off, where a conf file's unset flag is on): gang does not vote on JobPipelined
RECLAIM_FLAGS = {
    "conformance": ("enableReclaimable",),
    "gang": ("enableReclaimable", "enableJobStarving"),
    "proportion": ("enableReclaimable", "enableQueueOrder", "enablePreemptive"),
    "capacity": ("enableReclaimable", "enableQueueOrder", "enablePreemptive"),
    "priority": ("enableReclaimable", "enableJobOrder", "enableTaskOrder"),
}


def only(plugins: dict[str, tuple[str, ...]], *names: str) -> dict[str, dict[str, bool]]:
    """Every Volcano flag off for each plugin but those it names."""
    return {name: {flag: flag in plugins[name] for flag in VOLCANO_FLAGS} for name in names}


def reclaim_conf(*plugins: str) -> str:
    return tiers(*plugins, flags=only(RECLAIM_FLAGS, *plugins), actions="reclaim")


LOW_MID_HIGH = [
    build_priority_class("low-priority", 100),
    build_priority_class("mid-priority", 500),
    build_priority_class("high-priority", 1000),
]


def reclaim_rows() -> list[Row]:
    t = "volcano/reclaim"
    return [
        Row(
            t,
            Case(
                "sort reclaimees when reclaiming from overusing queue",
                reclaim_conf("conformance", "gang", "priority", "proportion"),
                nodes=[node("n1", "4", "4Gi")],
                groups=[
                    build_pod_group("pg1", "c1", "q1", 1, priority_class="mid-priority"),
                    build_pod_group("pg2", "c1", "q2", 1, priority_class="low-priority"),
                    build_pod_group("pg3", "c1", "q3", 1, priority_class="high-priority"),
                ],
                pods=[
                    build_pod("c1", "preemptee1-1", "n1", "1", "1G", "pg1", labels=yes("true")),
                    build_pod("c1", "preemptee1-2", "n1", "1", "1G", "pg1", labels=yes("true")),
                    build_pod("c1", "preemptee2-1", "n1", "1", "1G", "pg2", labels=yes("true")),
                    build_pod("c1", "preemptee2-2", "n1", "1", "1G", "pg2", labels=yes("false")),
                    build_pod("c1", "preemptor1", "", "1", "1G", "pg3"),
                ],
                queues=[build_queue("q1"), build_queue("q2"), build_queue("q3")],
                classes=LOW_MID_HIGH,
            ),
            evicted=["c1/preemptee2-1"],
        ),
        Row(
            t,
            Case(
                "sort reclaimees when reclaiming from overusing queues with different queue priority",
                reclaim_conf("conformance", "gang", "proportion"),
                nodes=[node("n1", "4", "4Gi")],
                groups=[build_pod_group(f"pg{i}", "c1", f"q{i}", 1, priority_class="mid-priority") for i in (1, 2, 3)],
                pods=[
                    build_pod("c1", "preemptee1-1", "n1", "1", "1G", "pg1", labels=yes("true")),
                    build_pod("c1", "preemptee1-2", "n1", "1", "1G", "pg1", labels=yes("false")),
                    build_pod("c1", "preemptee2-1", "n1", "1", "1G", "pg2", labels=yes("true")),
                    build_pod("c1", "preemptee2-2", "n1", "1", "1G", "pg2", labels=yes("false")),
                    build_pod("c1", "preemptor1", "", "1", "1G", "pg3"),
                ],
                # the test names no PriorityClass: mid-priority resolves to nothing, every job equal
                queues=[build_queue("q1", priority=5), build_queue("q2", priority=10), build_queue("q3", priority=1)],
            ),
            evicted=["c1/preemptee1-1"],
        ),
        Row(
            t,
            Case(
                "can not reclaim resources when task preemption policy is never",
                reclaim_conf("conformance", "gang", "proportion"),
                nodes=[node("n1", "1", "1Gi", pods="1")],
                groups=[
                    build_pod_group("pg1", "c1", "q1", 0, priority_class="low-priority"),
                    build_pod_group("pg2", "c1", "q2", 0, priority_class="high-priority"),
                ],
                pods=[
                    build_pod("c1", "preemptee1", "n1", "1", "1G", "pg1", labels=yes("true")),
                    never(build_pod("c1", "preemptor1", "", "1", "1G", "pg2")),
                ],
                queues=[build_queue("q1", 5), build_queue("q2", 10)],
                classes=[build_priority_class("low-priority", 100), with_class(LOW_MID_HIGH[2], "Never")],
            ),
            evicted=[],
        ),
        Row(
            t,
            Case(
                "Reclaim succeeds for second task when first task has PreemptionPolicy=Never",
                reclaim_conf("conformance", "gang", "proportion"),
                nodes=[node("n1", "2", "2G")],
                groups=[
                    build_pod_group("pg-victim", "c1", "q1", 1, phase="Running", priority_class="low-priority"),
                    build_pod_group("pg-preemptor", "c1", "q2", 2, priority_class="high-priority-no-preempt"),
                ],
                pods=[
                    build_pod("c1", "victim-pod-no", "n1", "1", "1G", "pg-victim", labels=yes("false")),
                    build_pod("c1", "victim-pod", "n1", "1", "1G", "pg-victim", labels=yes("true")),
                    never(build_pod("c1", "preemptor-task1-non-preemptable", "", "1", "1G", "pg-preemptor")),
                    build_pod("c1", "preemptor-task2-preemptable", "", "1", "1G", "pg-preemptor"),
                ],
                queues=[build_queue("q1"), build_queue("q2")],
                classes=[
                    build_priority_class("low-priority", 100),
                    with_class(build_priority_class("high-priority-no-preempt", 1000), "Never"),
                    build_priority_class("high-priority-can-preempt", 900),
                ],
            ),
            evicted=["c1/victim-pod"],
        ),
    ]


def phases(expected: dict[str, str]) -> Any:
    """A check of the PodGroups' phases at the end."""

    def check(got: Outcome) -> str:
        seen = {k: got.phases.get(k, "") for k in expected}
        return "" if seen == expected else f"phases {seen}, expected {expected}"

    return check


ENQUEUE = tiers("drf", "proportion", "sla", "gang", actions="enqueue")


def enqueue_rows() -> list[Row]:
    t = "volcano/enqueue"
    cap4 = {"cpu": "4", "memory": "4G"}
    return [
        Row(
            t,
            Case(
                "when podgroup status is inqueue",
                ENQUEUE,
                nodes=[],
                groups=[build_pod_group("pg1", "c1", "c1", 2)],
                pods=[build_pod("c1", "p1", "", "1", "1G", "pg1"), build_pod("c1", "p2", "", "1", "1G", "pg1")],
                queues=[build_queue("c1", capability=cap4), build_queue("c2", capability=cap4)],
            ),
            check=phases({"c1/pg1": "Inqueue"}),
        ),
        Row(
            t,
            Case(
                "when podgroup status is pending",
                ENQUEUE,
                nodes=[],
                groups=[
                    build_pod_group("pg1", "c1", "c1", 1, phase="Pending"),
                    build_pod_group("pg2", "c1", "c2", 1, phase="Pending"),
                ],
                pods=[build_pod("c1", "p1", "", "3", "1G", "pg1"), build_pod("c1", "p2", "", "1", "1G", "pg2")],
                queues=[build_queue("c1", capability=cap4), build_queue("c2", capability=cap4)],
            ),
            check=phases({"c1/pg1": "Inqueue", "c1/pg2": "Inqueue"}),
        ),
        Row(
            t,
            Case(
                "when podgroup status is running",
                ENQUEUE,
                nodes=[node("n1", "4", "4G")],  # the test's running pods name no node; they run on one here
                groups=[build_pod_group("pg1", "c1", "c1", 2, phase="Running")],
                pods=[build_pod("c1", "p1", "n1", "1", "1G", "pg1"), build_pod("c1", "p2", "n1", "1", "1G", "pg1")],
                queues=[build_queue("c1", capability=cap4)],
            ),
            check=phases({"c1/pg1": "Running"}),
        ),
        Row(
            t,
            Case(
                "pggroup cannot enqueue because the specified queue is c1, but there is only c2",
                ENQUEUE,
                nodes=[],
                groups=[build_pod_group("pg1", "c1", "c1", 0, phase="Pending")],
                pods=[],
                queues=[build_queue("c2", capability=cap4)],
            ),
            check=phases({"c1/pg1": "Pending"}),
        ),
        Row(
            t,
            Case(
                "pggroup cannot enqueue because queue resources are less than podgroup MinResources",
                ENQUEUE,
                nodes=[],
                groups=[
                    build_pod_group("pg1", "c1", "c1", 1, phase="Pending", min_resources={"cpu": "8", "memory": "8G"})
                ],
                pods=[],
                queues=[build_queue("c1", capability={"cpu": "1", "memory": "1G"})],
            ),
            check=phases({"c1/pg1": "Pending"}),
        ),
    ]


def proportion_rows() -> list[Row]:
    t = "volcano/proportion"
    n = [node("n1", "2", "2G"), node("n2", "2", "2G")]
    res = {"1c2g": ("1", "2G"), "2c1g": ("2", "1G"), "1c0g": ("1", "0G"), "0c1g": ("0", "1G"), "1c1g": ("1", "1G")}

    def minres(key: str) -> dict[str, str]:
        cpu, memory = res[key]
        return {"cpu": cpu, "memory": memory}

    running = [
        build_pod("ns1", "pod1", "n1", *res["1c2g"], "pg1"),
        build_pod("ns1", "pod2", "n2", *res["2c1g"], "pg2"),
    ]
    running_groups = [
        build_pod_group("pg1", "ns1", "q1", 1, phase="Running", min_resources=minres("1c2g")),
        build_pod_group("pg2", "ns1", "q2", 1, phase="Running", min_resources=minres("2c1g")),
    ]
    queues = [
        build_queue("q1", capability={"cpu": "2", "memory": "2G"}),
        build_queue("q2", capability={"cpu": "3", "memory": "3G"}),
    ]
    all_on = {"proportion": {"enabledAllocatable": True, "enabledOverused": True, "enableJobEnqueued": True}}
    enqueueable = {"proportion": {"enabledAllocatable": False, "enabledOverused": False, "enableJobEnqueued": True}}
    allocatable = {"proportion": {"enabledAllocatable": True, "enabledOverused": False, "enableJobEnqueued": False}}

    def case(name: str, flags: dict[str, dict[str, bool]], pod: str, group: str, queue: str, key: str) -> Case:
        return Case(
            name,
            tiers("proportion", flags=flags, actions="enqueue, allocate"),
            nodes=n,
            groups=[
                *running_groups,
                build_pod_group(group, "ns1", queue, 1, phase="Pending", min_resources=minres(key)),
            ],
            pods=[*running, build_pod("ns1", pod, "", *res[key], group)],
            queues=queues
            if queue != "q3"
            else [build_queue("q3", capability={"cpu": "3", "memory": "3G"}, state="Closed")],
        )

    rows = [
        Row(
            t,
            case(
                "case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
                all_on,
                "pod3",
                "pg3",
                "q1",
                "1c0g",
            ),
            binds={"ns1/pod3": "n1"},
            evicted=[],
        ),
        Row(
            t,
            case(
                "case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
                all_on,
                "pod4",
                "pg4",
                "q2",
                "0c1g",
            ),
            binds={"ns1/pod4": "n2"},
            evicted=[],
        ),
        Row(
            t,
            case("case2: exceed capacity, can not enqueue", enqueueable, "pod5", "pg5", "q1", "1c1g"),
            binds={},
            evicted=[],
        ),
        Row(
            t,
            case("case3: exceed deserved, can not allocate", allocatable, "pod5", "pg5", "q1", "1c1g"),
            binds={},
            evicted=[],
        ),
    ]
    closed = case("case4: queue with  non-open state, can not enqueue", enqueueable, "pod6", "pg6", "q3", "1c1g")
    closed.pods = [closed.pods[-1]]
    closed.groups = [closed.groups[-1]]
    rows.append(Row(t, closed, binds={}, evicted=[]))
    big = {"cpu": "2", "memory": "4Gi"}
    rows.append(
        Row(
            t,
            Case(
                "case0: Pods are assigned according to the order of Queue Priority in which PGs are placed",
                tiers("proportion", flags={"proportion": {"enableQueueOrder": True}}, actions="allocate, reclaim"),
                nodes=[node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
                groups=[
                    build_pod_group("pg1", "ns1", "q1", 1, phase="Running"),
                    build_pod_group("pg2", "ns1", "q2", 1),
                    build_pod_group("pg3", "ns1", "q3", 1),
                ],
                pods=[
                    build_pod("ns1", "p1", "n1", "2", "4Gi", "pg1"),
                    build_pod("ns1", "p2", "", "2", "4Gi", "pg2"),
                    build_pod("ns1", "p3", "", "2", "4Gi", "pg3"),
                ],
                queues=[
                    build_queue("q1", priority=5, capability=big),
                    build_queue("q2", priority=1, capability=big),
                    build_queue("q3", priority=10, capability=big),
                ],
            ),
            binds={"ns1/p3": "n2"},
            evicted=[],
        )
    )
    return rows


def priority_rows() -> list[Row]:
    t = "volcano/priority"
    classes = [build_priority_class("low-priority", 100), build_priority_class("high-priority", 1000)]
    groups = [
        build_pod_group("pg1", "ns1", "q1", 1, priority_class="low-priority"),
        build_pod_group("pg2", "ns2", "q1", 1, priority_class="high-priority"),
    ]
    six = {"cpu": "6", "memory": "6G"}

    def conf(enable: bool) -> str:
        flags = {
            "priority": {
                "enableTaskOrder": True,
                "enableJobOrder": True,
                "enablePreemptable": enable,
                "enableReclaimable": enable,
                "enableJobStarving": True,
            }
        }
        return tiers("priority", flags=flags, actions="allocate, preempt")

    return [
        Row(
            t,
            Case(
                "enable preempt low priority: enablePreemptable:true",
                conf(True),
                nodes=[node("node1", "6", "6G"), node("node2", "2", "2G")],
                groups=groups,
                pods=[
                    build_pod("ns1", "preemptee1", "node1", "3", "3G", "pg1", labels=yes("true")),
                    build_pod("ns1", "preemptee2", "node1", "3", "3G", "pg1", labels=yes("true"), priority=1000),
                    build_pod("ns2", "preemptor1", "", "3", "3G", "pg2"),
                ],
                queues=[build_queue("q1", capability=six)],
                classes=classes,
            ),
            evicted=["ns1/preemptee1"],
            binds={"ns2/preemptor1": "node1"},  # pipelined there (ExpectPipeLined), bound once the victim is gone
        ),
        Row(
            t,
            Case(
                "disable preempt low priority: enablePreemptable:false",
                conf(False),
                nodes=[node("node1", "3", "3G"), node("node2", "3", "3G")],
                groups=groups,
                pods=[
                    build_pod("ns1", "preemptee1", "node1", "3", "3G", "pg1", labels=yes("true")),
                    build_pod("ns1", "preemptee2", "node2", "3", "3G", "pg1", labels=yes("false")),
                    build_pod("ns2", "preemptor1", "", "3", "3G", "pg2"),
                ],
                queues=[build_queue("q1", capability=six)],
                classes=classes,
            ),
            evicted=[],
            binds={},
        ),
    ]


def overcommit_rows() -> list[Row]:
    """TestOvercommitPlugin asks JobEnqueueable of a PodGroup with no pods: here the enqueue action
    decides, and the PodGroup's phase says what it decided."""
    t = "volcano/overcommit"
    nodes = [build_node("n1", "2", "4Gi", "110"), build_node("n2", "4", "16Gi", "110")]

    def case(name: str, factor: float, min_resources: dict[str, str] | None, capability: dict[str, str] | None) -> Case:
        conf = (
            'actions: "enqueue"\ntiers:\n- plugins:\n  - name: overcommit\n'
            f"    enableJobEnqueued: true\n    arguments: {{overcommit-factor: {factor}}}\n"
        )
        return Case(
            name,
            conf,
            nodes=nodes,
            groups=[build_pod_group("pg1", "test-namespace", "c1", 2, phase="Pending", min_resources=min_resources)],
            pods=[],
            queues=[build_queue("c1", capability=capability)],
        )

    normal = {"cpu": "2000m", "memory": "2G"}
    return [
        Row(
            t,
            case("overCommitFactor is more than 0", 1.2, normal, None),
            check=phases({"test-namespace/pg1": "Inqueue"}),
        ),
        Row(
            t,
            case("overCommitFactor is less than 0", 0.8, normal, None),
            check=phases({"test-namespace/pg1": "Inqueue"}),
        ),
        Row(
            t,
            case("when the required resources of pg are too large", 1.2, {"cpu": "20000m", "memory": "20G"}, None),
            check=phases({"test-namespace/pg1": "Pending"}),
        ),
        Row(
            t,
            case("when pg does not fill MinResources", 1.2, None, {"cpu": "200m", "memory": "0.5G"}),
            check=phases({"test-namespace/pg1": "Inqueue"}),
        ),
    ]


FAIR_SHARE_FLAGS = {
    "drf": ("enablePreemptable", "enableJobOrder"),
    "proportion": ("enableQueueOrder", "enableReclaimable"),
    "predicates": ("enablePredicate",),
    "nodeorder": ("enableNodeOrder",),
}


def fair_share_rows() -> list[Row]:
    """allocate's TestFareShareAllocate: queues served in the order of their share (proportion's queue
    order; its Allocatable off), each time a job of theirs is placed."""
    t = "volcano/allocate"
    plugins = ("drf", "proportion", "predicates", "nodeorder")
    conf = tiers(*plugins, flags=only(FAIR_SHARE_FLAGS, *plugins), actions="allocate")
    nodes = [node("node-1", "5", "5G")]
    queues = [build_queue("q-1"), build_queue("q-2")]
    return [
        Row(
            t,
            Case(
                "queue with low DRF share value has high priority, should allocate first",
                conf,
                nodes=nodes,
                groups=[
                    build_pod_group("pg-small-1", "ns-1", "q-1", 0, phase="Running"),
                    build_pod_group("pg-large-1", "ns-1", "q-1", 0),
                    build_pod_group("pg-large-2", "ns-1", "q-2", 0),
                ],
                pods=[
                    build_pod("ns-1", "pod-small-1", "node-1", "1", "1G", "pg-small-1"),
                    build_pod("ns-1", "pod-large-1", "", "2", "2G", "pg-large-1"),
                    build_pod("ns-1", "pod-large-2", "", "3", "2G", "pg-large-2"),
                ],
                queues=queues,
            ),
            binds={"ns-1/pod-large-2": "node-1"},
            evicted=[],
        ),
        Row(
            t,
            Case(
                "queue's DRF share value will be updated and its priority will change before it is put back into "
                "the priority queue",
                conf,
                nodes=nodes,
                groups=[
                    build_pod_group("pg-small-1", "ns-1", "q-1", 0, phase="Running"),
                    build_pod_group("pg-large-1", "ns-1", "q-1", 0),
                    build_pod_group("pg-small-2", "ns-1", "q-2", 0),
                    build_pod_group("pg-large-2", "ns-1", "q-2", 0),
                ],
                pods=[
                    build_pod("ns-1", "pod-small-1", "node-1", "1", "1G", "pg-small-1"),
                    build_pod("ns-1", "pod-large-1", "", "2", "2G", "pg-large-1"),
                    build_pod("ns-1", "pod-large-2", "", "2", "2G", "pg-large-2"),
                    build_pod("ns-1", "pod-small-2", "", "1", "1G", "pg-small-2"),
                ],
                queues=queues,
            ),
            binds={"ns-1/pod-large-1": "node-1", "ns-1/pod-large-2": "node-1"},
            evicted=[],
        ),
        Row(
            t,
            Case(
                "queue's one jobs has no pending tasks, should be put back to queues for next job",
                conf,
                nodes=nodes,
                groups=[
                    build_pod_group("pg-1", "ns-1", "q-1", 0, phase="Running"),
                    build_pod_group("pg-2", "ns-1", "q-1", 0),
                ],
                pods=[
                    build_pod("ns-1", "pod-1", "node-1", "1", "1G", "pg-1"),
                    build_pod("ns-1", "pod-2", "", "2", "2G", "pg-2"),
                ],
                queues=[build_queue("q-1")],
            ),
            binds={"ns-1/pod-2": "node-1"},
            evicted=[],
        ),
    ]


# Cases that use what the kit does not have: (table, Volcano test, how many cases, reason).
MISSING = [
    (
        "volcano/allocate",
        "TestAllocateWithNetWorkTopologies",
        27,
        "hyperNode network topology (HyperNode CRD, highestTierAllowed)",
    ),
    ("volcano/allocate", "TestNodeLevelScoreWithNetWorkTopologies", 1, "hyperNode network topology"),
    ("volcano/allocate", "TestHyperNodeBinpackWithNetWorkTopologies", 1, "hyperNode network topology"),
    ("volcano/allocate", "TestAllocateWithPartitionPolicyNetworkTopology", 37, "hyperNode network topology, subGroups"),
    (
        "volcano/allocate",
        "TestAllocateWithPVC",
        2,
        "PersistentVolumeClaims bound by the scheduler's volume binder: its tables cover them",
    ),
    ("volcano/allocate", "allocate_shard_test.go", 1, "scheduler sharding (NodeShard)"),
    (
        "volcano/preempt",
        "TestTopologyAwarePreempt (its 2 rows beyond TestPreempt's)",
        2,
        "enableTopologyAwarePreemption",
    ),
]


def rows() -> list[Row]:
    return [
        *preempt_rows(),
        *reclaim_rows(),
        *enqueue_rows(),
        *proportion_rows(),
        *priority_rows(),
        *overcommit_rows(),
        *fair_share_rows(),
    ]
