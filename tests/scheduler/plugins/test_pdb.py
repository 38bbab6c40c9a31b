"""`pdb`: victims that would break a PodDisruptionBudget are not chosen (Volcano's pdb plugin cases,
kube-scheduler's rule), allowances worked out from the spec where no controller wrote them, and
evictions counted for the rest of the session."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runtimekit.kube.semantics.labels import EVERYTHING, Selector, label_selector
from runtimekit.scheduler.cache.policy import disruption_budget
from runtimekit.scheduler.framework.info import TaskInfo, TaskStatus
from runtimekit.scheduler.framework.policy import DisruptionBudget
from runtimekit.scheduler.plugins.pdb import Pdb, allowance
from scheduler.plugins.policy_cases import Group, Node, Pod, Queue, build_cache, evicted, run

LABEL = {"volcano.sh/job-name": "job-1"}


def budget(
    allowed: int | None,
    selector: Selector | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> DisruptionBudget:
    chosen = label_selector({"matchLabels": LABEL}) if selector is None else selector
    return DisruptionBudget("ns1", "test-pdb", chosen, allowed, min_available, max_unavailable)


def opened(*budgets: DisruptionBudget, pods: list[Pod] | None = None) -> tuple[Pdb, list[TaskInfo]]:
    pods = pods or [
        Pod("test-pod1", "g", "1", "1Gi", node="n1", labels=LABEL),
        Pod("test-pod2", "g", "1", "1Gi", node="n1", labels=LABEL),
    ]
    cache = build_cache([Node("n1", "8", "8Gi")], pods, [Group("g", "default", "Running")], [Queue("default")])
    job = next(iter(cache.jobs.values()))
    for task in job.tasks.values():
        task.status = TaskStatus.RUNNING
    plugin = Pdb()
    plugin.on_session_open(SimpleNamespace(snapshot=SimpleNamespace(budgets=budgets), jobs=cache.jobs))
    return plugin, sorted(job.tasks.values(), key=lambda t: t.name)


@pytest.mark.parametrize(
    ("budgets", "victims"),
    [
        pytest.param((), ["test-pod1", "test-pod2"], id="no budgets: every candidate"),
        pytest.param((budget(0),), [], id="no disruption allowed: none"),
        pytest.param((budget(1),), ["test-pod1"], id="one allowed: the first"),
    ],
)
def test_volcanos_cases(budgets: tuple[DisruptionBudget, ...], victims: list[str]) -> None:
    plugin, tasks = opened(*budgets)
    assert [t.name for t in plugin.preemptable(tasks[0], tasks) or []] == victims
    assert [t.name for t in plugin.reclaimable(tasks[0], tasks) or []] == victims


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        pytest.param({"min_available": 1}, 1, id="minAvailable 1 of 2"),
        pytest.param({"min_available": "100%"}, 0, id="minAvailable 100%"),
        pytest.param({"max_unavailable": 1}, 1, id="maxUnavailable 1"),
        pytest.param({"max_unavailable": "50%"}, 1, id="maxUnavailable 50% of 2"),
        pytest.param({}, 0, id="neither"),
    ],
)
def test_the_allowance_comes_from_the_spec_where_no_controller_wrote_it(
    spec: dict[str, int | str], allowed: int
) -> None:
    plugin, tasks = opened(budget(None, None, spec.get("min_available"), spec.get("max_unavailable")))
    assert allowance(plugin.budgets[0], tasks) == allowed


def test_an_empty_selector_and_an_unlabelled_pod_match_nothing() -> None:
    plugin, tasks = opened(budget(0, EVERYTHING))
    assert len(plugin.preemptable(tasks[0], tasks) or []) == 2
    unlabelled = [Pod("bare", "g", "1", "1Gi", node="n1")]
    plugin, tasks = opened(budget(0), pods=unlabelled)
    assert [t.name for t in plugin.preemptable(tasks[0], tasks) or []] == ["bare"]


def test_a_pod_already_disrupted_is_not_counted_again() -> None:
    plugin, tasks = opened(
        DisruptionBudget("ns1", "b", label_selector({"matchLabels": LABEL}), 0, disrupted=frozenset({"test-pod1"}))
    )
    assert [t.name for t in plugin.preemptable(tasks[0], tasks) or []] == ["test-pod1"]


def test_a_budget_object_reads_as_its_controller_wrote_it() -> None:
    obj = {
        "metadata": {"name": "b", "namespace": "ns1"},
        "spec": {
            "minAvailable": "50%",
            "selector": {"matchLabels": LABEL, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        },
        "status": {"observedGeneration": 1, "disruptionsAllowed": 2, "disruptedPods": {"p": "2024-01-01T00:00:00Z"}},
    }
    parsed = disruption_budget(obj)
    assert (parsed.allowed, parsed.min_available, parsed.disrupted) == (2, "50%", frozenset({"p"}))
    assert parsed.selector is not None
    assert parsed.selector.matches({**LABEL, "tier": "web"})
    assert not parsed.selector.matches(LABEL)
    assert disruption_budget({"metadata": {"name": "b"}, "spec": {"maxUnavailable": 1}}).allowed is None


PREEMPT = """
actions: "allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
- plugins:
  - name: predicates
"""


@pytest.mark.parametrize(("allowed", "victims"), [(0, 0), (1, 1), (2, 2)])
def test_preemption_evicts_no_more_than_the_budget_allows_in_a_session(allowed: int, victims: int) -> None:
    """Two pending high-priority pods each need one of three running low-priority pods' room."""
    node = Node("n1", "3", "3Gi")
    pods = [Pod(f"low{i}", f"l{i}", "1", "1Gi", node="n1", labels=LABEL) for i in range(3)]
    pods += [Pod(f"high{i}", f"h{i}", "1", "1Gi") for i in range(2)]
    groups = [Group(f"l{i}", "default", "Running") for i in range(3)] + [Group(f"h{i}", "default") for i in range(2)]
    cache = build_cache([node], pods, groups, [Queue("default")])
    for job in cache.jobs.values():
        for task in job.tasks.values():
            task.priority = job.priority = 100 if job.name.startswith("h") else 1
    cache.budgets = (DisruptionBudget("ns1", "b", label_selector({"matchLabels": LABEL}), allowed),)
    run(PREEMPT, cache)
    assert len(evicted(cache)) == victims
