"""The capacity plugin's own table (Volcano's `Test_capacityPlugin_OnSessionOpenWithoutHierarchy`,
pkg/scheduler/plugins/capacity/capacity_test.go) as rows for the end-to-end runner (live_tables.py):
queues with `deserved` and `capability`, allocate then reclaim, CPU and memory and scalar resources
(`nvidia.com/A100`, `nvidia.com/gpu` as plain extended resources on the nodes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.live_tables import Row
from scheduler.volcano_cases import Case, build_node, build_pod, build_pod_group, build_queue
from scheduler.volcano_more_rows import only, tiers, yes

T = "volcano/capacity"
FLAGS = {
    "capacity": ("enabledAllocatable", "enablePreemptive", "enableReclaimable", "enableQueueOrder"),
    "predicates": ("enablePredicate",),
    "gang": ("enableJobStarving",),
}
CONF = tiers(*FLAGS, flags=only(FLAGS, *FLAGS), actions="allocate, reclaim")


def _scalar(name: str) -> str:
    """`nvidia_com_gpu` -> `nvidia.com/gpu` (a keyword argument's name for a resource's)."""
    return name.replace("nvidia_com_", "nvidia.com/")


def node(name: str, cpu: str, memory: str, labels: Mapping[str, str] | None = None, **scalars: str) -> dict[str, Any]:
    obj = build_node(name, cpu, memory, "10", labels)
    obj["status"]["allocatable"].update(
        {k.replace("_", "/").replace("nvidia/com", "nvidia.com"): v for k, v in scalars.items()}
    )
    return obj


def pod(
    name: str,
    where: str,
    cpu: str,
    memory: str,
    group: str,
    labels: Mapping[str, str] | None = None,
    selector: Mapping[str, str] | None = None,
    gpu: str = "",
    a100: str = "",
) -> dict[str, Any]:
    obj = build_pod("ns1", name, where, cpu, memory, group, labels=labels, selector=selector)
    requests = obj["spec"]["containers"][0]["resources"]["requests"]
    for key, value in (("nvidia.com/gpu", gpu), ("nvidia.com/A100", a100)):
        if value:
            requests[key] = value
    if cpu == "0" and memory in ("0", "0Gi"):
        del requests["cpu"], requests["memory"]
    for key in [k for k, v in requests.items() if not v]:  # BuildResourceList("1", ""): no memory
        del requests[key]
    obj["spec"]["containers"][0]["resources"] = {
        "requests": requests,
        "limits": {k: v for k, v in requests.items() if k.startswith("nvidia.com/")},
    }
    return obj


def group(name: str, queue: str, running: bool) -> dict[str, Any]:
    return build_pod_group(name, "ns1", queue, 1, phase="Running" if running else "Inqueue")


def res(cpu: str, memory: str, **scalars: str) -> dict[str, str]:
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    out.update({_scalar(k): v for k, v in scalars.items()})
    return out


def queue(
    name: str, deserved: dict[str, str] | None, capability: dict[str, str] | None, priority: int = 0
) -> dict[str, Any]:
    return build_queue(name, capability=capability, deserved=deserved, priority=priority)


def rows() -> list[Row]:
    worker = {"selector": "worker"}
    n1, n2 = node("n1", "2", "4Gi", worker), node("n2", "2", "4Gi")
    n3 = node("n3", "2", "4Gi", worker, nvidia_com_A100="10")
    n4 = node("n4", "2", "4Gi", nvidia_com_A100="10")
    n7 = node("n7", "4", "8Gi", nvidia_com_gpu="4")
    n8 = node("n8", "4", "8Gi", nvidia_com_gpu="1")
    cases = [
        (
            Case(
                "case0: Pod allocatable when queue has not exceed capability",
                CONF,
                nodes=[n1, n2],
                groups=[group("pg1", "q1", True), group("pg2", "q1", False)],
                pods=[pod("p1", "n1", "1", "1Gi", "pg1"), pod("p2", "", "1", "1Gi", "pg2", selector=worker)],
                queues=[queue("q1", None, res("2", "2Gi"))],
            ),
            {"ns1/p2": "n1"},
            [],
        ),
        (
            Case(
                "case1: Pod not allocatable when queue exceed queue capability",
                CONF,
                nodes=[n1, n2],
                groups=[group("pg3", "q2", True), group("pg4", "q2", False)],
                pods=[pod("p3", "n1", "1", "1Gi", "pg3"), pod("p4", "", "1", "1Gi", "pg4")],
                queues=[queue("q2", None, res("1.5", "1.5Gi"))],
            ),
            {},
            [],
        ),
        (
            Case(
                "case2: Can reclaim from other queues when allocated < deserved",
                CONF,
                nodes=[n1, n2],
                groups=[group("pg5", "q3", True), group("pg6", "q4", False)],
                pods=[
                    pod("p5", "n1", "2", "4Gi", "pg5", labels=yes("false")),
                    pod("p6", "n2", "2", "4Gi", "pg5"),
                    pod("p7", "", "2", "4Gi", "pg6"),
                ],
                queues=[queue("q3", res("2", "4Gi"), None), queue("q4", res("2", "4Gi"), None)],
            ),
            {"ns1/p7": "n2"},
            ["ns1/p6"],
        ),
        (
            Case(
                "case3: CPU & Memory are overused, scalar resource is not overused, but candidate pod has not request "
                "CPU & Memory, reclaim should happen",
                CONF,
                nodes=[n3, n4],
                groups=[group("pg7", "q5", True), group("pg8", "q6", True), group("pg9", "q6", False)],
                pods=[
                    pod("p8", "n3", "0", "0Gi", "pg7", labels=yes("false"), a100="10"),
                    pod("p9", "n4", "0", "0Gi", "pg7", a100="10"),
                    pod("p10", "n3", "2", "4Gi", "pg8"),
                    pod("p11", "n4", "2", "4Gi", "pg8"),
                    pod("p12", "", "0", "0Gi", "pg9", a100="10"),
                ],
                queues=[
                    queue("q5", res("2", "4Gi", nvidia_com_A100="10"), None),
                    queue("q6", res("2", "4Gi", nvidia_com_A100="10"), None),
                ],
            ),
            {"ns1/p12": "n4"},
            ["ns1/p9"],
        ),
        (
            Case(
                "case4: Pods are assigned according to the order of Queue Priority in which PGs are placed",
                CONF,
                nodes=[node("n5", "2", "4Gi"), node("n6", "2", "4Gi")],
                groups=[group("pg10", "q7", True), group("pg11", "q8", False), group("pg12", "q9", False)],
                pods=[
                    pod("p13", "n5", "2", "4Gi", "pg10"),
                    pod("p14", "", "2", "4Gi", "pg11"),
                    pod("p15", "", "2", "4Gi", "pg12"),
                ],
                queues=[
                    queue("q7", None, res("2", "4Gi"), priority=5),
                    queue("q8", None, res("2", "4Gi"), priority=1),
                    queue("q9", None, res("2", "4Gi"), priority=10),
                ],
            ),
            {"ns1/p15": "n6"},
            [],
        ),
        (
            Case(
                "case5: Can reclaim from other queues when allocated + req <= deserved on one dimension",
                CONF,
                nodes=[n1],
                groups=[group("pg16", "q10", True), group("pg17", "q10", False), group("pg18", "q11", True)],
                pods=[
                    pod("p16", "n1", "1", "3Gi", "pg16"),
                    pod("p17", "", "1", "1Gi", "pg17"),
                    pod("p18", "n1", "1", "1Gi", "pg18"),
                ],
                queues=[queue("q10", res("2", "2Gi"), res("4", "4Gi")), queue("q11", res("0", "0Gi"), res("2", "2Gi"))],
            ),
            {"ns1/p17": "n1"},
            ["ns1/p18"],
        ),
        (
            Case(
                "case6: Can not reclaim from other queues when allocated + req > deserved",
                CONF,
                nodes=[n1],
                groups=[group("pg19", "q12", True), group("pg20", "q12", False), group("pg21", "q13", True)],
                pods=[
                    pod("p19", "n1", "1", "1Gi", "pg19"),
                    pod("p20", "", "1", "2Gi", "pg20"),
                    pod("p21", "n1", "1", "1Gi", "pg21"),
                ],
                queues=[queue("q12", res("1", "2Gi"), res("4", "4Gi")), queue("q13", res("0", "0Gi"), res("2", "2Gi"))],
            ),
            {},
            [],
        ),
        (
            Case(
                "case7: allocated does not contain scalar dimension (GPU), deserved does; should not reclaim",
                CONF,
                nodes=[n7],
                groups=[
                    group("pg22", "queue14", True),
                    group("pg23", "queue15", True),
                    group("pg24", "queue16", True),
                    group("pg25", "queue16", False),
                ],
                pods=[
                    pod("p22", "n7", "2", "4Gi", "pg22"),
                    pod("p23", "n7", "0", "0Gi", "pg23", gpu="1"),
                    pod("p24", "n7", "2", "1Gi", "pg24", gpu="1"),
                    pod("p25", "", "2", "3Gi", "pg25", gpu="1"),
                ],
                queues=[
                    queue("queue14", res("2", "4Gi", nvidia_com_gpu="2"), None),
                    queue("queue15", None, None),
                    queue("queue16", res("2", "4Gi", nvidia_com_gpu="2"), None),
                ],
            ),
            {},
            [],
        ),
        (
            Case(
                "case8: reclaimer dimensions are considered properly while evicting reclaimees",
                CONF,
                nodes=[n8],
                groups=[
                    group("pg26", "queue17", True),
                    group("pg27", "queue17", True),
                    group("pg28", "queue17", True),
                    group("pg29", "queue18", True),
                    group("pg30", "queue18", False),
                ],
                pods=[
                    pod("p26", "n8", "0", "4Gi", "pg26"),
                    pod("p27", "n8", "1", "0Gi", "pg27"),
                    pod("p28", "n8", "0", "0Gi", "pg28", gpu="1"),
                    pod("p29", "n8", "2", "4Gi", "pg29"),
                    pod("p30", "", "1", "0Gi", "pg30", gpu="1"),
                ],
                queues=[
                    queue("queue17", res("2", "2Gi"), None),
                    queue("queue18", res("2", "4Gi", nvidia_com_gpu="1"), None),
                ],
            ),
            {"ns1/p30": "n8"},
            ["ns1/p28"],
        ),
        (
            Case(
                "case9: reclaimee has intersecting scalar dimensions with deserved shouldn't be reclaimed on "
                "cpu/memory",
                CONF,
                nodes=[n8],
                groups=[group("pg31", "queue19", True), group("pg32", "queue20", False)],
                pods=[pod("p31", "n8", "4", "4Gi", "pg31", gpu="1"), pod("p32", "", "1", "1Gi", "pg32")],
                queues=[
                    queue("queue19", res("", "", nvidia_com_gpu="1"), None),
                    queue("queue20", res("2", "2Gi"), None),
                ],
            ),
            {},
            [],
        ),
        (
            Case(
                "case10: PreemptiveFn respects capability — no reclaim when futureUsed would exceed capability",
                CONF,
                nodes=[node("n9", "8", "100Gi"), node("n10", "8", "100Gi")],
                groups=[
                    group("pg33", "queue21", True),
                    group("pg34", "queue21", False),
                    group("pg35", "queue22", True),
                ],
                pods=[
                    pod("p33", "n9", "7", "90Gi", "pg33"),
                    pod("p34", "", "2", "5Gi", "pg34"),
                    pod("p35", "n10", "2", "5Gi", "pg35"),
                ],
                queues=[
                    queue("queue21", res("8", "100Gi"), res("8", "100Gi")),
                    queue("queue22", None, res("2", "5Gi")),
                ],
            ),
            {},
            [],
        ),
    ]
    # binds: where Volcano pipelines a reclaimer, it binds there once its victim is gone
    return [Row(T, case, binds=binds, evicted=evicted) for case, binds, evicted in cases] + enqueue_rows()


ENQUEUE_FLAGS = {"capacity": ("enabledAllocatable", "enablePreemptive", "enabledOverused", "enableJobEnqueued")}
ENQUEUE_CONF = tiers("capacity", flags=only(ENQUEUE_FLAGS, "capacity"), actions="enqueue, allocate")


def enqueue_rows() -> list[Row]:
    """TestEnqueueAndAllocatable: PodGroups with minResources enqueued (or not) by the queue's
    capability, then allocated within its deserved share in the dimensions the pod asks for."""
    nodes = [node("n1", "3", "3G"), node("n2", "3", "3G")]
    sizes = {"1c3g": ("1", "3G"), "3c1g": ("3", "1G"), "1c0g": ("1", "0G"), "0c1g": ("0", "1G"), "1c1g": ("1", "1G")}

    def pg(name: str, queue_name: str, size: str, running: bool = False) -> dict[str, Any]:
        cpu, memory = sizes[size]
        phase = "Running" if running else "Pending"
        return build_pod_group(name, "ns1", queue_name, 1, phase=phase, min_resources={"cpu": cpu, "memory": memory})

    running_pods = [pod("pod1", "n1", *sizes["1c3g"], "pg1"), pod("pod2", "n2", *sizes["3c1g"], "pg2")]
    running_groups = [pg("pg1", "q1", "1c3g", True), pg("pg2", "q2", "3c1g", True)]
    queues = [queue("q1", res("2", "2G"), res("2", "2G")), queue("q2", res("2", "2G"), res("3", "3G"))]

    def case(name: str, pod_name: str, group_name: str, queue_name: str, size: str) -> Case:
        return Case(
            name,
            ENQUEUE_CONF,
            nodes=nodes,
            groups=[*running_groups, pg(group_name, queue_name, size)],
            pods=[*running_pods, pod(pod_name, "", *sizes[size], group_name)],
            queues=queues,
        )

    closed = Case(
        "case4: queue with non-open state, can not enqueue",
        ENQUEUE_CONF,
        nodes=nodes,
        groups=[pg("pg6", "q3", "1c1g")],
        pods=[pod("pod6", "", *sizes["1c1g"], "pg6")],
        queues=[build_queue("q3", capability=res("3", "3G"), state="Closed")],
    )
    return [
        Row(
            T,
            case(
                "case0: memory exceed derserved, job only request cpu can be enqueued and allocated",
                "pod3",
                "pg3",
                "q1",
                "1c0g",
            ),
            binds={"ns1/pod3": "n1"},
            evicted=[],
        ),
        Row(
            T,
            case(
                "case1: cpu exceed derserved, job only request memory can be enqueued and allocated",
                "pod4",
                "pg4",
                "q2",
                "0c1g",
            ),
            binds={"ns1/pod4": "n2"},
            evicted=[],
        ),
        Row(T, case("case2: exceed capacity, can not enqueue", "pod5", "pg5", "q1", "1c1g"), binds={}, evicted=[]),
        Row(T, closed, binds={}, evicted=[]),
    ]
