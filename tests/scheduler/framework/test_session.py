"""How a session combines plugin answers across tiers (Volcano's rules), and statements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtimekit.model import LedgerError, NodeCapacity, NodeInventory, PodRequest
from runtimekit.scheduler.actions import allocate
from runtimekit.scheduler.actions.ordering import OrderedQueue
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.framework import BuildContext, Framework, Registry, TaskStatus, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    JobOrder,
    JobPipelined,
    NodeOrder,
    Plugin,
    Predicate,
    Preemptable,
    PrePredicate,
    Rows,
    Scores,
    Verdict,
    Vote,
)
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.gpushare import plugin as gpushare
from scheduler.helpers import job_of, meta, share, whole


class Toy(Plugin, JobOrder, Predicate, NodeOrder, JobPipelined, Preemptable):
    """A configurable plugin: its answers come from its arguments."""

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self.name = name
        self.args = args

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        order: list[str] = self.args.get("order", [])
        if left.name in order and right.name in order:
            return order.index(left.name) - order.index(right.name)
        return 0

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        banned = set(self.args.get("ban", []))
        names = ssn.table.names()
        passed = np.array([names[r] not in banned for r in rows], np.bool_)
        return Verdict(passed, [(f"banned by {self.name}", ~passed)])

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        bonus: dict[str, float] = self.args.get("bonus", {})
        names = ssn.table.names()
        return np.array([bonus.get(names[r] or "", 0.0) for r in rows])

    def job_pipelined(self, job: JobInfo) -> Vote:
        return Vote(self.args.get("vote", 0))

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo] | None:
        allowed = self.args.get("victims")
        return None if allowed is None else [c for c in candidates if c.name in allowed]


def registry() -> Registry:
    reg = Registry()
    reg.register_action("allocate", allocate.build)
    reg.register_plugin("gpushare", gpushare.build)
    for name in ("t1", "t2", "t3"):
        reg.register_plugin(name, lambda args, ctx, n=name: Toy(n, args))
    return reg


def cache(*names: str, gpus: int = 2) -> StaticCache:
    return StaticCache(
        [(NodeInventory.simulated(n, "T4", gpus, 16384), NodeCapacity(64000, 10**6 << 20, 110), meta(n)) for n in names]
    )


def session(conf: str, c: StaticCache) -> Session:
    return Framework(parse_conf(conf), registry(), BuildContext()).open_session(c)


TWO_TIERS = """
actions: "allocate"
tiers:
- plugins:
  - name: t1
    arguments: {order: [b, a], ban: [n1], bonus: {n2: 5}, vote: 0, victims: [v1, v2]}
  - name: t2
    arguments: {order: [a, b], ban: [n3], bonus: {n2: 1, n4: 7}, vote: 1, victims: [v2, v3]}
- plugins:
  - name: t3
    arguments: {vote: -1, victims: [v3]}
  - name: gpushare
    enableNodeOrder: false
"""


def test_first_decisive_order_wins() -> None:
    ssn = session(TWO_TIERS, cache("n1"))
    a, b, c = (job_of(n, share(100)) for n in "abc")
    assert [j.name for j in ssn.sorted_jobs([a, b, c])] == ["b", "a", "c"]


def test_predicates_must_all_pass_and_failures_are_counted() -> None:
    ssn = session(TWO_TIERS, cache("n1", "n2", "n3", "n4"))
    task = job_of("a", share(100)).tasks["a-0"]  # type: ignore[index]
    rows, errors = ssn.feasible(task)
    assert sorted(ssn.table.names()[r] for r in rows) == ["n2", "n4"]
    assert errors.reasons == {"banned by t1": 1, "banned by t2": 1}
    assert errors.message == "0/4 nodes are available: 1 banned by t1, 1 banned by t2."


def test_room_for_the_pod_itself_is_checked_first_with_kube_scheduler_reasons() -> None:
    capacities = {"full": (64000, 10**6, 0), "few-cpus": (500, 10**6 << 20, 110), "no-memory": (64000, 100, 110)}
    nodes = [*capacities, "fits"]
    c = StaticCache(
        [
            (
                NodeInventory.simulated(n, "T4", 2, 16384),
                NodeCapacity(*capacities.get(n, (64000, 10**6 << 20, 110))),
                meta(n),
            )
            for n in nodes
        ]
    )
    ssn = session('actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n', c)
    task = job_of("a", PodRequest(1000, 512, share(100).gpus)).tasks["a-0"]  # type: ignore[index]
    rows, errors = ssn.feasible(task)
    assert [ssn.table.names()[r] for r in rows] == ["fits"]
    assert errors.reasons == {"Too many pods": 1, "Insufficient cpu": 1, "Insufficient memory": 1}
    cpu_free = job_of("b", PodRequest(0, 0)).tasks["b-0"]  # type: ignore[index]
    rows, _ = ssn.feasible(cpu_free)
    assert len(rows) == 3  # a pod asking nothing still needs a pod slot


def test_scores_are_summed_and_ties_go_to_the_lowest_rank() -> None:
    ssn = session(TWO_TIERS, cache("n1", "n2", "n3", "n4"))
    task = job_of("a", share(100)).tasks["a-0"]  # type: ignore[index]
    row, _ = ssn.select(task)
    assert ssn.table.names()[row] == "n4"  # n4: 7 beats n2: 5 + 1
    tie = session(TWO_TIERS.replace("n4: 7", "n4: 6"), cache("n1", "n2", "n3", "n4"))
    row, _ = tie.select(task)
    assert tie.table.names()[row] == "n2"  # 6 == 6: n2 has the lower rank


def test_pipelined_votes_and_victim_intersection() -> None:
    ssn = session(TWO_TIERS, cache("n1"))
    job = job_of("a", share(100))
    assert ssn.job_pipelined(job)  # tier 1 permits, so tier 2's Reject is never asked
    same_tier = session(TWO_TIERS.replace("vote: 0", "vote: -1"), cache("n1"))
    assert not same_tier.job_pipelined(job)  # a Reject in the deciding tier refuses
    abstain = session(TWO_TIERS.replace("vote: 1", "vote: 0").replace("vote: -1", "vote: 0"), cache("n1"))
    assert abstain.job_pipelined(job)  # everyone abstains: permitted
    candidates = [TaskInfo(f"v{i}", "d", f"v{i}", job.key, share(100)) for i in (1, 2, 3)]  # type: ignore[arg-type]
    assert [v.name for v in ssn.preemptable(candidates[0], candidates)] == ["v2"]  # tier 1 intersects to v2


def test_statement_discard_restores_table_and_tasks() -> None:
    c = cache("n1", gpus=1)
    ssn = session('actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n', c)
    job = job_of("a", share(600), share(600))
    before = ssn.table.copy()
    stmt = ssn.statement()
    first, second = job.tasks.values()
    row = ssn.table.row("n1")
    choice = ssn.allocate_devices(first, row)
    assert not isinstance(choice, type(None))
    stmt.allocate(first, row, choice)  # type: ignore[arg-type]
    assert first.status is TaskStatus.ALLOCATED
    with pytest.raises(LedgerError):
        stmt.allocate(second, row, choice)  # type: ignore[arg-type]
    stmt.discard()
    assert first.status is TaskStatus.PENDING
    assert first.placement is None
    np.testing.assert_array_equal(ssn.table.core_free, before.core_free)
    np.testing.assert_array_equal(ssn.table.cpu_free, before.cpu_free)


def test_allocate_action_binds_what_fits_and_reports_the_rest() -> None:
    c = cache("n1", "n2", gpus=1)
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n    arguments: {gpushare.policy: bestfit}\n'
    framework = Framework(parse_conf(conf), registry())
    for i, (name, request) in enumerate((("big", whole(2)), ("s1", share(600)), ("s2", share(300)), ("w", whole(1)))):
        c.add_job(job_of(name, request, created=float(i)))
    framework.run_once(c)
    assert sorted(c.bound) == ["s1-0", "s2-0", "w-0"]
    assert c.unschedulable["big-0"].message == "0/2 nodes are available: 2 too few whole free GPUs."
    held = sorted((str(p.node), p.slots[0].core_milli) for p in c.ledger.bookings().values())
    assert held == [("n1", 300), ("n1", 600), ("n2", 1000)]  # best fit packs both shares on n1


@pytest.mark.parametrize("others", [0, 1], ids=["alone", "with-another-job"])
def test_a_job_ready_with_tasks_left_gets_further_turns(others: int) -> None:
    c = cache("n1", "n2", gpus=1)
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n'
    c.add_job(job_of("a", share(400), share(400), share(400), min_member=1))
    if others:
        c.add_job(job_of("b", share(200), created=1.0))
    Framework(parse_conf(conf), registry()).run_once(c)
    assert sorted(c.bound) == ["a-0", "a-1", "a-2"] + (["b-0"] if others else [])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from("abcde")), min_size=1, max_size=12))
def test_the_fallback_sort_key_orders_as_the_comparison(jobs: list[tuple[int, str]]) -> None:
    ssn = session('actions: "allocate"\ntiers:\n- plugins:\n  - name: gpushare\n', cache("n1"))
    assert ssn.job_key is not None  # no plugin orders jobs: the key stands in for the comparison
    infos = [job_of(f"{name}{i % 2}", share(100), created=float(at)) for i, (at, name) in enumerate(jobs)]
    by_key, by_compare = OrderedQueue(ssn.job_order, infos, ssn.job_key), OrderedQueue(ssn.job_order, infos)
    popped = [(by_key.pop(), by_compare.pop()) for _ in infos]
    assert [a.key for a, _ in popped] == [b.key for _, b in popped]
    assert all(a is b for a, b in popped)  # equal keys: first pushed first, in both
    assert session(TWO_TIERS, cache("n1")).job_key is None  # a plugin orders jobs: no key


class Skipper(Plugin, PrePredicate, Predicate):
    """Skips its predicate for pods named 'skip-*'; its predicate bans every node."""

    name = "skipper"

    def pre_predicate(self, task: TaskInfo) -> Status:
        return SKIP if task.name.startswith("skip") else SUCCESS

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        passed = np.zeros(rows.size, np.bool_)
        return Verdict(passed, [("banned by skipper", ~passed)])


def test_a_pre_predicate_that_skips_spares_the_task_its_predicate() -> None:
    reg = registry()
    reg.register_plugin("skipper", lambda args, ctx: Skipper())
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: skipper\n  - name: gpushare\n'
    ssn = Framework(parse_conf(conf), reg, BuildContext()).open_session(cache("n1", "n2"))
    skipped = job_of("skip", share(100)).tasks["skip-0"]  # type: ignore[index]
    checked = job_of("check", share(100)).tasks["check-0"]  # type: ignore[index]
    assert ssn.feasible(skipped)[0].size == 2
    rows, errors = ssn.feasible(checked)
    assert rows.size == 0
    assert errors.reasons == {"banned by skipper": 2}


def test_unresolvable_rows_are_those_a_verdict_marks_among_the_failures() -> None:
    ssn = session(TWO_TIERS, cache("n1", "n2", "n3", "n4"))
    task = job_of("a", whole(3)).tasks["a-0"]  # type: ignore[index]
    _, errors = ssn.feasible(task)  # 2-GPU nodes: no eviction gives a pod 3 GPUs
    names = ssn.table.names()
    assert sorted(str(names[r]) for r in errors.unresolvable_rows()) == ["n2", "n4"]  # n1, n3: banned first
    assert errors.resolvable
