"""The cluster cache's fast path for a bound pod's event that is only its binding (`_confirmed`):
it reaches exactly the state the full path (`_book_bound` reading the pod anew) reaches, for the
event of a pod this scheduler bound and for every way the event can differ from what was assumed
(labels, annotations, spec, node, deletion, claims, a PodGroup, an event before the binder's), and
it is taken (no task read anew) in the common case."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

from runtimekit.model import NodeName, Placement
from runtimekit.scheduler.cache import cluster
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.scheduling_queue import SchedulingQueue
from scheduler.fake_api import P, node_object, pod_object

Pod = dict[str, Any]
Change = Callable[[Pod], None]


def new_cache() -> ClusterCache:
    cache = ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock(), retry_seconds=0.0))
    for name in ("n1", "n2"):
        cache.on_node("ADDED", node_object(name))
    return cache


def state(cache: ClusterCache) -> dict[str, Any]:
    """Everything a bound pod's event may change in the cache, by value."""
    with cache.lock:
        book = cache.pods.frozen()
        return {
            "running": {k: vars(t) for k, t in cache.running.items()},
            "assumed": set(cache.assumed),
            "bookings": dict(cache.ledger.bookings()),
            "free": {n: (cache.ledger.table.free_gpus(n), cache.ledger.table.row(n)) for n in cache.nodes},
            "queue_allocated": {k: v for k, v in cache.queue_allocated.items() if not v.is_empty},
            "jobs": {k: (j.members, j.group, j.grouped, j.namespace, j.name) for k, j in cache.jobs.items()},
            "pods": {k: (vars(facts), node) for k, (facts, node) in book.pods.items()},  # PodFacts: eq by identity
            "by_label": {k: set(v) for k, v in book.by_label.items()},
            "queue": sorted(e.task.key for e in cache.queue),
            "uid_of": dict(cache.uid_of),
            "orphans": dict(cache.orphans),
            "unbooked": set(cache.unbooked),
            "notices": [(t.key, r, m) for t, r, m in cache.notices],
            "conflicts": dict(cache.conflicts),
        }


def binding_of(pending: Pod, node: str = "n1") -> Pod:
    """The pod as the scheduler's binding leaves it: nodeName, its annotations, a status."""
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = node
    bound["metadata"]["annotations"][P.annotations.assume_time] = "1733399062000000000"
    bound["metadata"]["resourceVersion"] = "9"
    bound["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return bound


def play(cache: ClusterCache, pending: Pod, change: Change | None, finish_first: bool, again: bool) -> TaskInfo:
    """A pending pod assumed on n1 and bound; its bound event (`change`d), before or after the
    binder's finish_binding, and (`again`) a later status event of it."""
    cache.on_pod("ADDED", pending)
    (entry,) = [e for e in cache.queue if e.task.name == pending["metadata"]["name"]]
    task = entry.task.clone()
    task.node = NodeName("n1")
    task.placement = Placement(task.node, task.request.cpu_milli, task.request.memory_bytes)
    bound_task = cache.assume(task)
    assert bound_task is not None
    event = binding_of(pending)
    if change is not None:
        change(event)
    if finish_first:
        cache.finish_binding(bound_task)
        cache.on_pod("MODIFIED", event)
    else:
        cache.on_pod("MODIFIED", event)
        cache.finish_binding(bound_task)
    if again:
        later = copy.deepcopy(event)
        later["status"] = {"phase": "Running"}
        later["metadata"]["resourceVersion"] = "10"
        cache.on_pod("MODIFIED", later)
    return bound_task


def set_label(pod: Pod) -> None:
    pod["metadata"].setdefault("labels", {})["app"] = "other"


def set_queue(pod: Pod) -> None:
    pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "other"


def set_priority(pod: Pod) -> None:
    pod["spec"]["priority"] = 7


def set_cpu(pod: Pod) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"


def set_node(pod: Pod) -> None:
    pod["spec"]["nodeName"] = "n2"


def set_deleting(pod: Pod) -> None:
    pod["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"


def set_claims(pod: Pod) -> None:
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]


def set_null_field(pod: Pod) -> None:
    pod["spec"]["hostname"] = None  # a field left out before, null now: the same spec


def set_other_scheduler_annotation(pod: Pod) -> None:
    pod["metadata"]["annotations"]["example.com/note"] = "x"


CHANGES: dict[str, Change | None] = {
    "binding only": None,
    "label": set_label,
    "queue annotation": set_queue,
    "another annotation": set_other_scheduler_annotation,
    "priority": set_priority,
    "request": set_cpu,
    "node": set_node,
    "deleting": set_deleting,
    "claims": set_claims,
    "null field": set_null_field,
}


def pending_pods() -> dict[str, Pod]:
    alone = pod_object("p", {P.resources.core: "30", P.resources.memory: "2"})
    alone["metadata"]["labels"] = {"app": "db"}
    grouped = pod_object("g", {}, annotations={"scheduling.k8s.io/group-name": "pg"})
    return {"alone": alone, "grouped": grouped}


@pytest.mark.parametrize(
    ("finish_first", "again"), [(True, False), (False, False), (True, True)], ids=["bound", "event first", "again"]
)
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
@pytest.mark.parametrize("kind", ["alone", "grouped"])
def test_the_fast_path_reaches_the_state_the_full_path_does(
    monkeypatch: pytest.MonkeyPatch, kind: str, change: str, finish_first: bool, again: bool
) -> None:
    pending = pending_pods()[kind]
    fast, slow = new_cache(), new_cache()
    for cache in (fast, slow):
        cache.on_podgroup(
            "ADDED",
            {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": 1, "queue": "q"}},
        )
    play(fast, copy.deepcopy(pending), CHANGES[change], finish_first, again)
    with monkeypatch.context() as patch:
        patch.setattr(ClusterCache, "_confirmed", lambda *_: False)
        play(slow, copy.deepcopy(pending), CHANGES[change], finish_first, again)
    assert state(fast) == state(slow)


def test_the_binding_event_of_a_pod_it_bound_reads_nothing_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = new_cache()
    reads: list[str] = []
    original = cluster.task_from_pod

    def counted(pod: Any, *args: Any) -> TaskInfo:
        reads.append(pod["metadata"]["name"])
        return original(pod, *args)

    monkeypatch.setattr(cluster, "task_from_pod", counted)
    pending = pending_pods()["alone"]
    task = play(cache, pending, None, finish_first=True, again=True)
    assert reads == ["p"]  # its pending event only
    running = cache.running[task.key]
    assert running.pod is not None
    assert running.pod["status"] == {"phase": "Running"}
    assert running.placement == cache.ledger.booking(task.key)
    assert not cache.assumed
    reads.clear()
    set_label(other := binding_of(pending))
    cache.on_pod("MODIFIED", other)
    assert reads == ["p"]  # a label changed: read anew
