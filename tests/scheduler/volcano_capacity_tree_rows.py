"""The capacity plugin's hierarchical table (Volcano's `Test_capacityPlugin_OnSessionOpenWithHierarchy`,
pkg/scheduler/plugins/capacity/capacity_test.go) as rows for the end-to-end runner (live_tables.py):
queue trees (`spec.parent`) with `deserved`, `capability` and `guarantee`, enqueue, reclaim and
allocate, CPU and memory and extended resources."""

from __future__ import annotations

from typing import Any

from scheduler.live_tables import Row
from scheduler.volcano_capacity_rows import group, node, pod, res
from scheduler.volcano_cases import Case, build_pod_group, build_queue
from scheduler.volcano_more_rows import only, phases, tiers, yes

T = "volcano/capacity-hierarchy"
FLAGS = {
    "capacity": (
        "enabledAllocatable",
        "enablePreemptive",
        "enableReclaimable",
        "enableQueueOrder",
        "enableHierarchy",
        "enableJobEnqueued",
    ),
    "predicates": ("enablePredicate",),
    "gang": ("enableJobStarving",),
}
CONF = tiers(*FLAGS, flags=only(FLAGS, *FLAGS), actions="enqueue, reclaim, allocate")


def q(name: str, parent: str, deserved: dict[str, str] | None, capability: dict[str, str] | None) -> dict[str, Any]:
    queue = build_queue(name, capability=capability, deserved=deserved)
    if parent:
        queue["spec"]["parent"] = parent
    return queue


def rows() -> list[Row]:
    n1 = node("n1", "8", "8Gi")
    n1["status"]["allocatable"]["pods"] = "11"
    root = q("root", "", None, None)
    q1, q2 = q("q1", "root", None, res("4", "4Gi")), q("q2", "root", None, res("4", "4Gi"))
    q11, q12 = q("q11", "q1", None, res("1", "1Gi")), q("q12", "q1", None, res("3", "3Gi"))
    q3 = q("q3", "root", res("4", "4Gi", pods="10"), res("4", "4Gi", pods="10"))
    q4 = q("q4", "root", res("2", "2Gi", pods="1"), res("4", "4Gi", pods="4"))
    q31 = q("q31", "q3", res("2", "2Gi", pods="2"), res("4", "4Gi", pods="4"))
    q32 = q("q32", "q3", res("2", "2Gi", pods="2"), res("4", "4Gi", pods="4"))
    q33 = q("q33", "q3", res("0", "0Gi", pods="2"), res("4", "4Gi", pods="4"))
    p6 = pod("p6", "n1", "2", "2Gi", "pg5", labels=yes("false"))
    pg5 = group("pg5", "q31", True)
    q71 = q("q71", "q7", None, res("6", "4Gi"))
    q72 = q("q72", "q7", None, res("6", "4Gi"))
    for child in (q71, q72):
        child["spec"]["guarantee"] = {"resource": {"cpu": "4", "memory": "3Gi"}}
    gpu_node = node("n-gpu", "8", "8Gi", nvidia_com_gpu="8")
    n2 = node("n2", "8", "8Gi", nvidia_com_gpu="8")
    n2["status"]["allocatable"]["hugepages-1Gi"] = "0"
    n3 = node("n3", "16", "16Gi", nvidia_com_a100="5")
    n3["status"]["allocatable"].update({"rdma/hca": "1001", "pods": "11"})
    a100 = {"nvidia.com/a100": "2", "rdma/hca": "1"}

    def scalar_pod(name: str, where: str, grp: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        obj = pod(name, where, "1", "1Gi", grp, labels=labels)
        obj["spec"]["containers"][0]["resources"]["requests"].update(a100)
        obj["spec"]["containers"][0]["resources"]["limits"] = dict(a100)
        return obj

    cases: list[tuple[Case, dict[str, str], list[str], dict[str, str] | None]] = [
        (
            Case(
                "case0: Pod allocatable when queue is leaf queue",
                CONF,
                nodes=[n1],
                groups=[group("pg1", "q11", False)],
                pods=[pod("p1", "", "1", "1Gi", "pg1")],
                queues=[root, q1, q2, q11, q12],
            ),
            {"ns1/p1": "n1"},
            [],
            None,
        ),
        (
            Case(
                "case1: Pod not allocatable when queue is not leaf queue",
                CONF,
                nodes=[n1],
                groups=[build_pod_group("pg2", "ns1", "q1", 1, phase="Pending")],
                pods=[pod("p2", "", "1", "1Gi", "pg2")],
                queues=[root, q1, q2, q11, q12],
            ),
            {},
            [],
            None,
        ),
        (
            Case(
                "case2: Pod allocatable when queue has not exceed capability",
                CONF,
                nodes=[n1],
                groups=[build_pod_group("pg3", "ns1", "q31", 2)],
                pods=[pod("p3", "", "2", "2Gi", "pg3"), pod("p4", "", "2", "2Gi", "pg3")],
                queues=[root, q3, q4, q31, q32],
            ),
            {"ns1/p3": "n1", "ns1/p4": "n1"},
            [],
            None,
        ),
        (
            Case(
                "case3: Can reclaim from other queues when allocated < deserved",
                CONF,
                nodes=[n1],
                groups=[group("pg4", "q4", True), pg5, group("pg6", "q32", False)],
                pods=[
                    pod("p5", "n1", "4", "4Gi", "pg4"),
                    p6,
                    pod("p7", "n1", "2", "2Gi", "pg5"),
                    pod("p8", "", "2", "2Gi", "pg6"),
                ],
                queues=[root, q3, q31, q32, q4],
            ),
            {"ns1/p8": "n1"},
            ["ns1/p7"],
            None,
        ),
        (
            Case(
                "case4: Pod is not allocatable when ancestor queue's real capability not enough",
                CONF,
                nodes=[n1],
                groups=[pg5, group("pg7", "q32", True), group("pg8", "q33", False)],
                pods=[p6, pod("p9", "n1", "2", "2Gi", "pg7"), pod("p10", "", "3", "3Gi", "pg8")],
                queues=[root, q3, q31, q32, q33],
            ),
            {},
            [],
            None,
        ),
        (
            Case(
                "case5: If the capability cpu or memory is not specified, the value should be inherited from parent "
                "queue",
                CONF,
                nodes=[n1],
                groups=[group("pg9", "q51", True)],
                pods=[pod("p11", "", "1", "", "pg9")],
                queues=[root, q("q5", "root", None, res("", "4Gi")), q("q51", "q5", None, res("", "2Gi"))],
            ),
            {"ns1/p11": "n1"},
            [],
            None,
        ),
        (
            Case(
                "case6: podgroup can't be enqueued when any ancestor queue's capability is not enough",
                CONF,
                nodes=[n1],
                groups=[
                    build_pod_group("pg10", "ns1", "q61", 1, phase="Pending", min_resources=res("2", "4Gi")),
                    build_pod_group("pg11", "ns1", "q62", 1, phase="Pending", min_resources=res("2", "4Gi")),
                ],
                pods=[],
                queues=[
                    root,
                    q("q6", "root", None, res("2", "4Gi")),
                    q("q61", "q6", None, None),
                    q("q62", "q6", None, None),
                ],
            ),
            {},
            [],
            {"ns1/pg10": "Inqueue", "ns1/pg11": "Pending"},
        ),
        (
            Case(
                "case7: the sum of sub queue 71 and 72's guarantee exceeds the capacity of queue7, but should not "
                "panic",
                CONF,
                nodes=[n1],
                pods=[],
                queues=[root, q("q7", "root", None, res("6", "4Gi")), q71, q72],
            ),
            {},
            [],
            None,
        ),
        (
            Case(
                "case8: When the queue's deserved value has a scalar resource set, the check can pass",
                CONF,
                nodes=[gpu_node],
                groups=[group("pg12", "q81", False)],
                pods=[pod("p12", "", "2", "2Gi", "pg12", gpu="1")],
                queues=[
                    root,
                    q("q8", "root", res("4", "4Gi", nvidia_com_gpu="8"), None),
                    q("q81", "q8", res("2", "2Gi", nvidia_com_gpu="4"), None),
                    q("q82", "q8", res("2", "2Gi", nvidia_com_gpu="4"), None),
                ],
            ),
            {"ns1/p12": "n-gpu"},
            [],
            None,
        ),
        (
            Case(
                "case9: When some scalar resources are 0 in deserved, the check can still pass",
                CONF,
                nodes=[n2],
                groups=[group("pg13", "q91", False)],
                pods=[pod("p13", "", "2", "2Gi", "pg13", gpu="1")],
                queues=[
                    root,
                    q("q9", "root", {**res("2", "2Gi", nvidia_com_gpu="8"), "hugepages-1Gi": "0"}, None),
                    q("q91", "q9", {**res("2", "2Gi", nvidia_com_gpu="4"), "hugepages-1Gi": "0"}, None),
                ],
            ),
            {"ns1/p13": "n2"},
            [],
            None,
        ),
        (
            Case(
                "case10: root queue's capability > cluster total resource, but should not panic",
                CONF,
                nodes=[n1],
                pods=[],
                queues=[q("root", "", None, res("16", "16Gi")), q("q10", "root", None, res("10", "4Gi"))],
            ),
            {},
            [],
            None,
        ),
        (
            Case(
                "case11: If the capability scalar resources is not specified, the value should be inherited from "
                "parent queue",
                CONF,
                nodes=[n2],
                groups=[group("pg14", "case11-queue11", False), group("pg15", "case11-queue12", False)],
                pods=[pod("p14", "", "1", "1Gi", "pg14", gpu="4"), pod("p15", "", "1", "1Gi", "pg15", gpu="4")],
                queues=[
                    root,
                    q("case11-queue1", "root", None, None),
                    q("case11-queue11", "case11-queue1", None, res("4", "4Gi", nvidia_com_gpu="4")),
                    q("case11-queue12", "case11-queue1", None, res("4", "4Gi", nvidia_com_gpu="4")),
                ],
            ),
            {"ns1/p14": "n2", "ns1/p15": "n2"},
            [],
            None,
        ),
        (
            Case(
                "case12: Can reclaim from other queues when allocated <= deserved on a single scalar dimension",
                CONF,
                nodes=[n3],
                groups=[
                    group("pg16", "case12-queue11", False),
                    group("pg17", "case12-queue12", True),
                    group("pg18", "case12-queue12", True),
                ],
                pods=[
                    scalar_pod("p16", "", "pg16"),
                    scalar_pod("p17", "n3", "pg17"),
                    scalar_pod("p18", "n3", "pg18", labels=yes("false")),
                ],
                queues=[
                    q("root", "", {**res("16", "16Gi", nvidia_com_a100="4"), "rdma": "1000"}, None),
                    q("case12-queue1", "root", {"nvidia.com/a100": "2"}, None),
                    q("case12-queue11", "case12-queue1", {"nvidia.com/a100": "2"}, None),
                    q("case12-queue12", "case12-queue1", None, None),
                ],
            ),
            {"ns1/p16": "n3"},
            ["ns1/p17"],
            None,
        ),
    ]
    return [
        Row(T, case, binds=binds, evicted=evicted, check=phases(expected) if expected else None)
        for case, binds, evicted, expected in cases
    ]
