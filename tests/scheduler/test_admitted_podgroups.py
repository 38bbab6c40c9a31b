"""A PodGroup admitted (Inqueue) before its pods exist keeps its minResources reserved in its queue and
the queue's ancestors: the next PodGroup is admitted only into what is left (Volcano's capacity and
proportion count every Inqueue job). The capacity tree's case6 of Volcano's own table, in process."""

from __future__ import annotations

from scheduler.volcano_capacity_tree_rows import rows as tree_rows
from scheduler.volcano_cases import Case, bound, build_node, build_pod, build_pod_group, build_queue, run
from scheduler.volcano_more_rows import tiers


def test_an_admitted_podgroup_without_pods_holds_its_ancestors_room() -> None:
    """pg10 was admitted in an earlier session (Inqueue, no pod yet): q6 (capability 2 CPUs, 4Gi) has
    no room left for pg11, which stays Pending."""
    case = next(r for r in tree_rows() if r.name.startswith("case6:")).case
    case.groups[0]["status"] = {"phase": "Inqueue"}
    api, _ = run(case)
    assert "ns1/pg11" not in api.groups or api.groups["ns1/pg11"].get("phase") == "Pending"


def test_proportion_counts_admitted_podgroups_without_pods() -> None:
    """The same under proportion: queue q (capability 2 CPUs) holds PodGroup a (2 CPUs, Inqueue, no pod
    yet); b asks 2 CPUs more and stays Pending."""
    groups = [
        build_pod_group("a", "ns1", "q", 1, phase="Inqueue", min_resources={"cpu": "2"}),
        build_pod_group("b", "ns1", "q", 1, phase="Pending", min_resources={"cpu": "2"}),
    ]
    queues = [build_queue("q", capability={"cpu": "2", "memory": "8Gi"})]
    case = Case(
        "proportion", tiers("proportion", actions="enqueue"), [build_node("n1", "8", "8Gi")], [], groups, queues
    )
    api, _ = run(case)
    assert api.groups.get("ns1/b", {}).get("phase", "Pending") == "Pending"


def test_proportion_reserves_only_what_an_inqueue_podgroup_does_not_hold_yet() -> None:
    """Volcano's TestNoDoubleCountingForInqueueJobWithBindingTasks, read back after a restart: a
    PodGroup read Inqueue (minResources 3 CPUs) whose 3 pods of 1 CPU are bound already reserves
    nothing more, so queue q1 (capability 4 CPUs) admits pgB (1 CPU) and it binds. Before, q1 counted
    pgA's 3 CPUs twice (allocated and inqueue), 1 + 3 + 3 > 4, and pgB stayed Pending. pgA's fourth
    pod (2 CPUs, no room) keeps pgA in the session."""
    groups = [
        build_pod_group("pgA", "ns1", "q1", 3, phase="Inqueue", min_resources={"cpu": "3", "memory": "3Gi"}),
        build_pod_group("pgB", "ns1", "q1", 1, phase="Pending", min_resources={"cpu": "1", "memory": "1Gi"}),
    ]
    pods = [build_pod("ns1", f"pA{i}", "n1", "1", "1Gi", "pgA") for i in (1, 2, 3)]
    pods += [build_pod("ns1", "pA4", "", "2", "1Gi", "pgA"), build_pod("ns1", "pB1", "", "1", "1Gi", "pgB")]
    queues = [build_queue("q1", capability={"cpu": "4", "memory": "8Gi"})]
    conf = tiers("gang", "predicates", "proportion", actions="enqueue, allocate")
    api, _ = run(Case("no double count", conf, [build_node("n1", "4", "8Gi")], pods, groups, queues))
    assert bound(api) == {"ns1/pB1": "n1"}
