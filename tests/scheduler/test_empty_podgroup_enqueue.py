"""A PodGroup with no pod yet is enqueued (Pending -> Inqueue, written to its status) as Volcano's
enqueue action does: Volcano's job controller creates a vcjob's pods only once its PodGroup has left
Pending, so a scheduler that waited for pods would block every vcjob."""

from __future__ import annotations

from typing import Any

from scheduler.volcano_cases import Case, build_node, build_pod_group, build_queue, run

ENQUEUE = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: proportion
"""


def _group(min_member: int, min_resources: dict[str, str] | None = None) -> dict[str, Any]:
    group = build_pod_group("pg1", "c1", "q1", min_member, phase="Pending")
    if min_resources:
        group["spec"]["minResources"] = min_resources
    return group


def test_a_podgroup_with_no_pods_becomes_inqueue() -> None:
    case = Case(
        "empty podgroup",
        ENQUEUE,
        nodes=[build_node("n1", "4", "4G")],
        pods=[],
        groups=[_group(2)],
        queues=[build_queue("q1")],
    )
    api, live = run(case)
    assert api.groups["c1/pg1"]["phase"] == "Inqueue"
    assert not live.has_work(enqueue=True)  # admitted: nothing left for a session until its pods come


def test_a_podgroup_whose_min_resources_do_not_fit_stays_pending() -> None:
    case = Case(
        "too big",
        ENQUEUE,
        nodes=[build_node("n1", "4", "4G")],
        pods=[],
        groups=[_group(2, {"cpu": "40", "memory": "40G"})],
        queues=[build_queue("q1")],
    )
    api, live = run(case)
    assert "c1/pg1" not in api.groups  # not admitted: its status is not rewritten
    assert live.has_work(enqueue=True)  # tried again by later sessions
    assert not live.has_work(enqueue=False)  # without the enqueue action nothing would admit it
