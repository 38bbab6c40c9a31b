"""A PodGroup admitted (Inqueue) before its pods exist keeps its minResources reserved in its queue and
the queue's ancestors: the next PodGroup is admitted only into what is left (Volcano's capacity and
proportion count every Inqueue job). The capacity tree's case6 of Volcano's own table, in process."""

from __future__ import annotations

from scheduler.volcano_capacity_tree_rows import rows as tree_rows
from scheduler.volcano_cases import Case, build_node, build_pod_group, build_queue, run
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
