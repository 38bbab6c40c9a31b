"""`sla`: Volcano's sla plugin cases, and an overdue job admitted whatever a later tier says."""

from __future__ import annotations

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.policy import waiting_time
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.arguments import ArgumentError, go_duration
from runtimekit.scheduler.framework.info import JobInfo, JobKey, Resources
from runtimekit.scheduler.framework.interfaces import Vote
from runtimekit.scheduler.plugins.sla import Sla, build
from scheduler.helpers import job_of, share, static_cache


def job(name: str, wait: float | None = None, created: float = 0.0) -> JobInfo:
    return JobInfo(JobKey(name), "default", name, created=created, waiting_time=wait)


@pytest.mark.parametrize(
    ("arguments", "first", "enqueueable"),
    [
        pytest.param(
            {"sla-waiting-time": "3m"}, True, Vote.PERMIT, id="a global waiting time: the earlier deadline first"
        ),
        pytest.param({}, False, Vote.ABSTAIN, id="none: the job with an SLA of its own first"),
    ],
)
def test_volcanos_cases(arguments: dict[str, str], first: bool, enqueueable: Vote) -> None:
    plugin = build(arguments, BuildContext())
    plugin.now = 10 * 3600.0
    job1, job2 = job("job1"), job("job2", wait=3600.0)
    assert (plugin.job_order(job1, job2) < 0) is first
    assert plugin.job_enqueueable(job1) is enqueueable
    assert plugin.job_pipelined(job1) is enqueueable


def test_a_job_is_not_admitted_by_sla_before_its_time() -> None:
    plugin = Sla(600.0)
    plugin.now = 300.0
    assert plugin.job_enqueueable(job("young")) is Vote.ABSTAIN
    plugin.now = 600.0
    assert plugin.job_enqueueable(job("young")) is Vote.PERMIT


@pytest.mark.parametrize("bad", [1, "soon", "-5m", "0s"], ids=["a number", "not a duration", "negative", "zero"])
def test_a_bad_waiting_time_is_refused_naming_the_argument(bad: object) -> None:
    with pytest.raises(ArgumentError, match="sla-waiting-time"):
        build({"sla-waiting-time": bad}, BuildContext())


@pytest.mark.parametrize(
    ("annotations", "seconds"),
    [
        pytest.param({"volcano.sh/sla-waiting-time": "1h2m3s"}, 3723.0, id="Volcano's annotation"),
        pytest.param({"sla-waiting-time": "90s"}, 90.0, id="the short annotation"),
        pytest.param({"volcano.sh/sla-waiting-time": "x", "sla-waiting-time": "2m"}, 120.0, id="a bad one is skipped"),
        pytest.param({}, None, id="none"),
    ],
)
def test_a_pod_groups_waiting_time_comes_from_its_annotations(
    annotations: dict[str, str], seconds: float | None
) -> None:
    assert waiting_time({"metadata": {"name": "pg", "annotations": annotations}}) == seconds


def test_go_durations() -> None:
    assert go_duration("1h2m3s4ms5us6ns") == pytest.approx(3723.004005006)
    assert go_duration("1.5h") == 5400.0


def test_an_overdue_job_is_admitted_even_when_a_later_tier_refuses() -> None:
    conf = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: sla
    arguments: {sla-waiting-time: 10m}
- plugins:
  - name: overcommit
    arguments: {overcommit-factor: 1.0}
  - name: gpushare
"""
    cache = static_cache("n1", gpus=1)
    cache.now = 3600.0
    overdue = job_of("overdue", share(500), created=0.0)
    fresh = job_of("fresh", share(500), created=3599.0)
    for j in (overdue, fresh):
        j.phase, j.has_podgroup = "Pending", True
        j.min_resources = Resources(10**9, 0, 0)  # more CPU than the cluster has: overcommit refuses
        cache.add_job(j)
    ssn = Framework(parse_conf(conf), builtin_registry(), BuildContext()).run_once(cache)
    assert {j.name: j.phase for j in ssn.jobs.values()} == {"overdue": "Inqueue", "fresh": "Pending"}
