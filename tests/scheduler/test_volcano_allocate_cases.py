"""Rows of Volcano's `TestAllocate` (pkg/scheduler/actions/allocate/allocate_test.go) on the live
cache: a task that fits nowhere stops its job only when the gang can no longer be met
(`NeedContinueAllocating`), a PodGroup's `minTaskMember` counts per task role (the gang plugin's
`CheckTaskValid`/`CheckTaskReady`), and tasks no plugin orders go in Volcano's order (the pod's
index in its Job's task, then age), with names, not random UIDs, breaking what ties remain."""

from __future__ import annotations

import random

import pytest

from runtimekit.model import PodKey, PodRequest
from runtimekit.scheduler.framework.info import JobKey, TaskInfo
from runtimekit.scheduler.framework.tiebreak import compare_tasks, pod_index
from scheduler.volcano_cases import Case, bound, build_node, build_pod, build_pod_group, build_queue, run

# TestAllocate's tier (gang, drf, proportion, predicates, nodeorder) and its one action.
ALLOCATE = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: drf
  - name: proportion
  - name: predicates
  - name: nodeorder
"""
ROLE = "volcano.sh/task-spec"


def role(name: str) -> dict[str, str]:
    return {ROLE: name}


def on(node_role: str) -> dict[str, str]:
    return {"nodeRole": node_role}


CASES = [
    Case(
        "prepredicate failed: node selector does not match",
        ALLOCATE,
        nodes=[build_node("n1", "2", "4Gi", "10", on("worker"))],
        groups=[build_pod_group("pg1", "c1", "c1", 1)],
        pods=[
            build_pod("c1", "p1", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
            build_pod("c1", "p2", "", "1", "1G", "pg1", labels=role("worker"), selector=on("worker")),
        ],
        queues=[build_queue("c1")],
    ),
    Case(
        "prepredicate failed and tasks are not used up, continue on until min member meet",
        ALLOCATE,
        nodes=[build_node("n1", "1", "2Gi", "10", on("master")), build_node("n2", "1", "2Gi", "10", on("worker"))],
        groups=[build_pod_group("pg1", "c1", "c1", 2, {"master": 1, "worker": 1})],
        pods=[
            build_pod("c1", "p0", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
            build_pod("c1", "p1", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
            build_pod("c1", "p2", "", "1", "1G", "pg1", labels=role("worker"), selector=on("worker")),
            build_pod("c1", "p3", "", "1", "1G", "pg1", labels=role("worker"), selector=on("worker")),
        ],
        queues=[build_queue("c1")],
    ),
    Case(
        "master's min member can not be allocated, break from allocating",
        ALLOCATE,
        nodes=[build_node("n1", "1", "2Gi", "10", on("master")), build_node("n2", "2", "2Gi", "10", on("worker"))],
        groups=[build_pod_group("pg1", "c1", "c1", 2, {"master": 2, "worker": 0})],
        pods=[
            build_pod("c1", "p0", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
            build_pod("c1", "p1", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
            build_pod("c1", "p2", "", "1", "1G", "pg1", labels=role("worker"), selector=on("worker")),
            build_pod("c1", "p3", "", "1", "1G", "pg1", labels=role("worker"), selector=on("worker")),
        ],
        queues=[build_queue("c1")],
    ),
    Case(
        "one Job with two Pods on one node",
        ALLOCATE,
        nodes=[build_node("n1", "2", "4Gi", "10")],
        groups=[build_pod_group("pg1", "c1", "c1", 0)],
        pods=[build_pod("c1", "p1", "", "1", "1G", "pg1"), build_pod("c1", "p2", "", "1", "1G", "pg1")],
        queues=[build_queue("c1")],
    ),
    Case(
        "two Jobs on one node",
        ALLOCATE,
        nodes=[build_node("n1", "2", "4G", "10")],
        groups=[build_pod_group("pg1", "c1", "c1", 0), build_pod_group("pg2", "c2", "c2", 0)],
        pods=[
            build_pod("c1", "pg1-p-1", "", "1", "1G", "pg1"),
            build_pod("c1", "pg1-p-2", "", "1", "1G", "pg1"),
            build_pod("c2", "pg2-p-1", "", "1", "1G", "pg2"),
            build_pod("c2", "pg2-p-2", "", "1", "1G", "pg2"),
        ],
        queues=[build_queue("c1"), build_queue("c2")],
    ),
    Case(
        "high priority queue should not block others",
        ALLOCATE,
        nodes=[build_node("n1", "2", "4G", "10")],
        groups=[build_pod_group("pg1", "c1", "c1", 0), build_pod_group("pg2", "c1", "c2", 0)],
        pods=[build_pod("c1", "p1", "", "3", "1G", "pg1"), build_pod("c1", "p2", "", "1", "1G", "pg2")],
        queues=[build_queue("c1"), build_queue("c2")],
    ),
]
# Volcano's ExpectBindMap of each row.
EXPECTED: dict[str, dict[str, str]] = {
    CASES[0].name: {"c1/p2": "n1"},
    CASES[1].name: {"c1/p0": "n1", "c1/p2": "n2"},
    CASES[2].name: {},
    CASES[3].name: {"c1/p1": "n1", "c1/p2": "n1"},
    CASES[4].name: {"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"},
    CASES[5].name: {"c1/p2": "n1"},
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_volcanos_allocate_rows_bind_what_volcano_binds(case: Case) -> None:
    api, _ = run(case)
    assert bound(api) == EXPECTED[case.name]


@pytest.mark.parametrize("seed", range(5))
def test_task_order_is_the_pods_index_then_age_whatever_the_uids(seed: int) -> None:
    """Room for one of two pods of a job: the one with the lower index in its Job's task goes, on
    every run (the UIDs are random, as the API server makes them; "9" sorts after "10" as text)."""
    rng = random.Random(seed)
    case = Case(
        "index order",
        ALLOCATE,
        nodes=[build_node("n1", "1", "4Gi")],
        groups=[build_pod_group("job", "c1", "c1", 1)],
        pods=[
            build_pod("c1", f"job-worker-{i}", "", "1", "1G", "job", uid=f"{rng.getrandbits(64):016x}") for i in (10, 9)
        ],
        queues=[build_queue("c1")],
    )
    api, _ = run(case)
    assert bound(api) == {"c1/job-worker-9": "n1"}


def task(name: str, created: float = 0.0, key: str = "") -> TaskInfo:
    return TaskInfo(PodKey(key or name), "ns", name, JobKey("ns/j"), PodRequest(0, 0), created=created)


@pytest.mark.parametrize(
    ("name", "index"),
    [("job-task-3", 3), ("job-task-+3", 3), ("job-3", None), ("a-b-x", None), ("job-task--3", 3), ("j-t-03", 3)],
)
def test_the_index_is_read_as_volcano_reads_it(name: str, index: int | None) -> None:
    assert pod_index(name) == index


def test_equal_pods_go_by_name_before_uid() -> None:
    first, second = task("pod-a", key="zz"), task("pod-b", key="aa")
    assert compare_tasks(first, second) < 0 < compare_tasks(second, first)
    older = task("pod-z", created=1.0)
    assert compare_tasks(older, task("pod-a", created=2.0)) < 0  # age before name
    assert compare_tasks(task("j-w-2", created=5.0), task("j-w-10", created=1.0)) < 0  # index before age


def test_a_gang_short_of_a_tasks_minimum_is_not_valid() -> None:
    """minTaskMember asks for two masters; only one exists: nothing binds, and the pods say why."""
    case = Case(
        "one master of two",
        ALLOCATE,
        nodes=[build_node("n1", "4", "4Gi")],
        groups=[build_pod_group("pg1", "c1", "c1", 2, {"master": 2, "worker": 0})],
        pods=[
            build_pod("c1", "p0", "", "1", "1G", "pg1", labels=role("master")),
            build_pod("c1", "p1", "", "1", "1G", "pg1", labels=role("worker")),
            build_pod("c1", "p2", "", "1", "1G", "pg1", labels=role("worker")),
        ],
        queues=[build_queue("c1")],
    )
    api, _ = run(case)
    assert bound(api) == {}
    why = "gang: 1/2 pods of task 'master' exist (minTaskMember); waiting for the rest"
    assert ("p0", "FailedScheduling", why) in api.events


def test_a_gang_binds_only_with_each_tasks_minimum_placed() -> None:
    """Room for three pods and workers first in line, but no node for the master: the gang
    (minMember 3: a master and two workers) waits rather than bind three workers."""
    case = Case(
        "roles before count",
        ALLOCATE,
        nodes=[build_node("n1", "3", "4Gi", "10", on("worker"))],
        groups=[build_pod_group("pg1", "c1", "c1", 3, {"master": 1, "worker": 2})],
        pods=[
            *(build_pod("c1", f"pg1-worker-{i}", "", "1", "1G", "pg1", labels=role("worker")) for i in range(3)),
            build_pod("c1", "pg1-master-0", "", "1", "1G", "pg1", labels=role("master"), selector=on("master")),
        ],
        queues=[build_queue("c1")],
    )
    api, _ = run(case)
    assert bound(api) == {}
