"""`resourcequota`: pod groups are admitted within their namespace's ResourceQuotas (Volcano's
resourcequota plugin cases), under the quota's own resource names, and what a namespace uses is
worked out from its bound pods where no quota controller writes it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache.live import live_cache
from runtimekit.scheduler.cache.policy import namespace_quota, pod_usage, quota_request
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, Resources
from runtimekit.scheduler.framework.interfaces import JobEnqueueable, Plugin, Vote
from runtimekit.scheduler.framework.policy import NamespaceQuota
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.plugins.policy_cases import Group, Node, Queue, build_cache

CONF = """
actions: "enqueue"
tiers:
- plugins:
  - name: resourcequota
  - name: rejecter
"""
NORMAL = {"cpu": "2000m", "memory": "2G"}
HUGE = {"cpu": "20000m", "memory": "20G"}


def quota(namespace: str, hard: dict[str, str], used: dict[str, str] | None = None) -> NamespaceQuota:
    obj = {"metadata": {"name": "test", "namespace": namespace}, "spec": {"hard": hard}}
    if used is not None:
        obj["status"] = {"hard": hard, "used": used}
    return namespace_quota(obj)


class Rejecter(Plugin, JobEnqueueable):
    """Refuses the pod group named pgA (Volcano's co-tier rejecter in its test)."""

    name = "rejecter"

    def job_enqueueable(self, job: JobInfo) -> Vote:
        return Vote.REJECT if job.name == "pgA" else Vote.ABSTAIN


def phases(groups: list[Group], quotas: dict[str, tuple[NamespaceQuota, ...]]) -> dict[str, str]:
    cache = build_cache([Node("n1", "4", "4G")], [], groups, [Queue("c1")])
    for job in cache.jobs.values():
        group = next(g for g in groups if g.name == job.name)
        job.quota_request = quota_request({"spec": {"minResources": group.min_resources}})
        job.min_resources = Resources(1) if group.min_resources else None
    cache.quotas = quotas
    registry = builtin_registry()
    registry.register_plugin("rejecter", lambda _a, _c: Rejecter())
    ssn = Framework(parse_conf(CONF), registry, BuildContext()).run_once(cache)
    return {job.name: job.phase for job in ssn.jobs.values()}


@pytest.mark.parametrize(
    ("min_resources", "quotas", "admitted"),
    [
        pytest.param(NORMAL, {"ns1": (quota("ns1", NORMAL, {}),)}, True, id="the quota has room for the group"),
        pytest.param(HUGE, {"ns1": (quota("ns1", NORMAL, {}),)}, False, id="the quota has no room"),
        pytest.param(HUGE, {}, True, id="no ResourceQuota"),
        pytest.param(None, {"ns1": (quota("ns1", NORMAL, {}),)}, True, id="no minResources"),
        pytest.param(
            {"cpu": "1"},
            {"ns1": (quota("ns1", {"requests.cpu": "1500m"}, {"requests.cpu": "1"}),)},
            False,
            id="cpu counts as requests.cpu",
        ),
    ],
)
def test_volcanos_cases(
    min_resources: dict[str, str] | None, quotas: dict[str, tuple[NamespaceQuota, ...]], admitted: bool
) -> None:
    result = phases([Group("pg1", "c1", "Pending", min_resources=min_resources)], quotas)
    assert result == {"pg1": "Inqueue" if admitted else "Pending"}


def test_a_group_refused_by_another_plugin_of_the_tier_does_not_take_quota() -> None:
    one = {"cpu": "1", "memory": "1G"}
    groups = [Group("pgA", "c1", "Pending", min_resources=one), Group("pgB", "c1", "Pending", min_resources=one)]
    assert phases(groups, {"ns1": (quota("ns1", one, {}),)}) == {"pgA": "Pending", "pgB": "Inqueue"}


def test_groups_admitted_in_one_session_count_against_the_quota() -> None:
    one = {"cpu": "1"}
    groups = [Group(f"pg{i}", "c1", "Pending", min_resources=one) for i in range(3)]
    result = phases(groups, {"ns1": (quota("ns1", {"cpu": "2"}, {}),)})
    assert sorted(result.values()) == ["Inqueue", "Inqueue", "Pending"]


def test_what_a_pod_counts_against_a_quota() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "example.com/foo": "2"}}},
                {"resources": {"limits": {"memory": "1Gi"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
        }
    }
    usage = pod_usage(pod)
    assert usage["pods"] == usage["count/pods"] == 1
    assert usage["requests.cpu"] == usage["cpu"] == 2  # the init container's 2 CPUs outweigh 0.5
    assert usage["requests.memory"] == usage["memory"] == Fraction(1 << 30)  # requests default to limits
    assert usage["limits.example.com/foo"] == 2


def test_the_live_cache_works_out_used_where_no_quota_controller_wrote_it() -> None:
    api = FakeApi()
    api.add_node(node_object("n1"))
    live = live_cache(P, P.scheduler_name, api)
    api.attach(live.cache)
    live.cache.on_node("ADDED", api.nodes["n1"])
    running = pod_object("running", {})
    running["spec"]["nodeName"] = "n1"
    running["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    api.add_pod(running)
    live.cache.on_quota(
        "ADDED", {"metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"cpu": "4", "pods": "10"}}}
    )
    live.cache.on_quota(
        "ADDED",
        {
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"hard": {"cpu": "4"}},
            "status": {"hard": {"cpu": "3"}, "used": {"cpu": "2"}},
        },
    )
    (computed, written) = sorted(live.snapshot().quotas["default"], key=lambda q: q.name)
    assert computed.used is not None
    assert (computed.used["cpu"], computed.used["pods"]) == (1, 1)
    assert (written.hard["cpu"], written.used) == (3, {"cpu": 2})
    live.binder.close()
