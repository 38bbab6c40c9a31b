"""Inter-pod affinity and topology spread across the placements of one session: the topology counts
follow each placement (kube-scheduler's AddPod) and each undone one (RemovePod), so the pods of one
job see each other as the allocate action places them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.builtin import builtin_registry
from runtimekit.scheduler.cache import StaticCache
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.framework import BuildContext, Framework, parse_conf
from runtimekit.scheduler.framework.info import JobInfo, JobKey
from runtimekit.scheduler.framework.interfaces import DeviceChoice
from runtimekit.scheduler.plugins.predicates import Predicates
from scheduler.kubesem.builders import HOST, constraint, is_in, labelled, pod, soft, term, weighted
from scheduler.plugins.kube_harness import cache_of, plugin, session_of, task_of

P = KitProtocol.default()
CONF = """actions: "allocate"
tiers:
- plugins: [{name: gang}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def hosts(count: int, zones: int = 1) -> list[Any]:
    return [labelled(f"n{i}", {HOST: f"n{i}", "zone": f"z{i % zones}"}) for i in range(count)]


def job(name: str, *manifests: dict[str, Any], min_member: int | None = None) -> JobInfo:
    out = JobInfo(JobKey(name), "default", name, min_member=min_member or len(manifests), has_podgroup=True)
    for i, manifest in enumerate(manifests):
        task = task_from_pod(manifest, P)
        task.job, task.created = out.key, float(i)
        out.add(task)
    return out


def run(cache: StaticCache, *jobs: JobInfo) -> dict[str, str]:
    for item in jobs:
        cache.add_job(item)
    Framework(parse_conf(CONF), builtin_registry(), BuildContext()).run_once(cache)
    return {cache.bound[key].name: str(cache.bound[key].node) for key in cache.bound}


def worker(i: int, **kwargs: Any) -> dict[str, Any]:
    return pod(f"w{i}", labels={"job": "train"}, **kwargs)


ONE_PER_NODE = [term(is_in("job", "train"), HOST)]


def test_a_job_with_one_worker_per_node_spreads_over_the_nodes() -> None:
    placed = run(cache_of(hosts(4)), job("train", *(worker(i, anti=ONE_PER_NODE) for i in range(4))))
    assert sorted(placed.values()) == ["n0", "n1", "n2", "n3"]


def test_a_cache_that_shares_its_table_shows_each_session_the_pods_bound_before() -> None:
    # the simulator's cache hands sessions its live pod book, frozen only when a plugin reads it
    cache = cache_of(hosts(3), share_table=True)
    placed: dict[str, str] = {}
    for i in range(4):
        placed = run(cache, job(f"w{i}", worker(i, anti=ONE_PER_NODE)))
    assert sorted(placed.values()) == ["n0", "n1", "n2"]
    assert [str(e.message) for e in cache.unschedulable.values()] == [
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    ]


def test_one_worker_too_many_leaves_the_whole_gang_waiting() -> None:
    cache = cache_of(hosts(3))
    placed = run(cache, job("train", *(worker(i, anti=ONE_PER_NODE) for i in range(4))))
    assert placed == {}
    # every member is told why, in the failing member's words (not a resource shortfall: there is room)
    assert {e.message for e in cache.unschedulable.values()} == {
        "gang: 3/4 tasks placed; w3: 0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    }


def test_a_hard_spread_over_zones_places_the_same_number_in_each() -> None:
    spread = [constraint(1, "zone", is_in("job", "train"))]
    placed = run(cache_of(hosts(6, zones=3)), job("train", *(worker(i, spread=spread) for i in range(6))))
    zones = Counter(int(node[1:]) % 3 for node in placed.values())
    assert sorted(zones.values()) == [2, 2, 2]


def test_a_soft_spread_and_preferred_anti_affinity_spread_pods_without_forcing_it() -> None:
    spread = [soft(1, "zone", is_in("job", "train"))]
    placed = run(cache_of(hosts(4, zones=2)), job("train", *(worker(i, spread=spread) for i in range(4)), min_member=1))
    assert sorted(Counter(int(n[1:]) % 2 for n in placed.values()).values()) == [2, 2]
    away = [weighted(100, term(is_in("job", "train"), HOST))]
    placed = run(cache_of(hosts(3)), job("train", *(worker(i, preferred_anti=away) for i in range(3)), min_member=1))
    assert sorted(placed.values()) == ["n0", "n1", "n2"]


def test_pods_already_on_nodes_repel_by_their_anti_affinity() -> None:
    held = pod("db", "n0", labels={"app": "db"}, anti=[term(is_in("tier", "web"), HOST)])
    placed = run(cache_of(hosts(2), [held]), job("web", pod("web", labels={"tier": "web"})))
    assert placed == {"web": "n1"}


def test_an_undone_placement_gives_its_domain_back() -> None:
    ssn = session_of(cache_of(hosts(2)))
    first = job("train", worker(0, anti=ONE_PER_NODE))
    task = next(iter(first.tasks.values()))
    statement = ssn.statement()
    statement.allocate(task, ssn.table.row("n0"), DeviceChoice())
    predicates = plugin(ssn, Predicates)
    second = task_of(worker(1, anti=ONE_PER_NODE))
    rows = ssn.table.active_rows()
    assert predicates.predicate(second, rows, ssn).passed.tolist() == [False, True]
    statement.discard()
    assert predicates.predicate(second, rows, ssn).passed.tolist() == [True, True]
    assert np.array_equal(ssn.table.active_rows(), rows)


def test_an_eviction_in_the_session_frees_the_domain() -> None:
    held = pod("w0", "n0", labels={"job": "train"}, anti=ONE_PER_NODE)
    cache = cache_of(hosts(1), [held])
    ssn = session_of(cache)
    running = task_of(held)
    running.node = "n0"  # type: ignore[assignment]
    predicates = plugin(ssn, Predicates)
    incoming = task_of(worker(1, anti=ONE_PER_NODE))
    rows = ssn.table.active_rows()
    assert predicates.predicate(incoming, rows, ssn).passed.tolist() == [False]
    predicates.on_deallocate(running)
    assert predicates.predicate(incoming, rows, ssn).passed.tolist() == [True]
