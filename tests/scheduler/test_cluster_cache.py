"""The cluster cache on its own, fed informer events by hand: pending pods of this scheduler go to the
queue, bound pods are booked, a pod that leaves gives back what it held and moves the unschedulable
pods; assume, forget and finish binding keep the ledger, the pods on nodes and the queue in step."""

from __future__ import annotations

import copy
import threading

import pytest

from runtimekit.model import NodeName, Placement
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.snapshot import take_snapshot
from runtimekit.scheduler.framework.info import TaskInfo, TaskStatus
from runtimekit.scheduler.scheduling_queue import QueueState, SchedulingQueue
from scheduler.fake_api import P, node_object, pod_object

N1 = NodeName("n1")


def cache_with_node() -> ClusterCache:
    cache = ClusterCache(P, P.scheduler_name, SchedulingQueue(threading.RLock()))
    cache.on_node("ADDED", node_object("n1"))
    return cache


def placed(cache: ClusterCache, name: str) -> TaskInfo:
    (entry,) = [e for e in cache.queue if e.task.name == name]
    task = entry.task.clone()
    task.node, task.placement = N1, Placement(N1, 1000, 1024)
    return task


@pytest.mark.parametrize(
    ("scheduler", "bound", "in_queue", "booked"),
    [
        (P.scheduler_name, False, True, False),
        ("default-scheduler", False, False, False),  # not ours to schedule
        ("default-scheduler", True, False, True),  # holds resources whoever bound it
        (P.scheduler_name, True, False, True),
    ],
)
def test_a_pod_goes_to_the_queue_or_the_ledger(scheduler: str, bound: bool, in_queue: bool, booked: bool) -> None:
    cache = cache_with_node()
    pod = pod_object("p", {}, scheduler=scheduler)
    if bound:
        pod["spec"]["nodeName"] = "n1"
    cache.on_pod("ADDED", pod)
    assert (len(cache.queue) == 1) is in_queue
    assert bool(cache.ledger.bookings()) is booked
    assert bool(cache.running) is booked


def test_a_pod_that_leaves_gives_back_what_it_held_and_moves_unschedulable_pods() -> None:
    cache = cache_with_node()
    pod = pod_object("p", {})
    pod["spec"]["nodeName"] = "n1"
    cache.on_pod("ADDED", pod)
    generation = cache.queue.generation
    cache.on_pod("DELETED", pod)
    assert not cache.ledger.bookings()
    assert not cache.running
    assert not cache.pods.frozen().pods
    assert cache.queue.generation == generation + 1
    pending = pod_object("q", {})
    cache.on_pod("ADDED", pending)
    cache.on_pod("DELETED", pending)  # held nothing: nothing moves
    assert cache.queue.generation == generation + 1
    assert len(cache.queue) == 0


def test_an_assumed_pod_is_booked_binding_and_its_bound_event_confirms_it() -> None:
    cache = cache_with_node()
    pod = pod_object("p", {})
    cache.on_pod("ADDED", pod)
    bound = cache.assume(placed(cache, "p"))
    assert bound is not None
    assert bound.node == N1
    assert cache.queue.state(bound.key) is QueueState.BINDING
    assert cache.ledger.booking(bound.key) == Placement(N1, 1000, 1024)
    assert cache.assume(placed(cache, "p")) is None  # its bind is in flight
    cache.on_pod("MODIFIED", pod)  # an event older than the bind changes nothing
    assert cache.queue.state(bound.key) is QueueState.BINDING
    cache.finish_binding(bound)
    assert cache.queue.state(bound.key) is None
    assert cache.running[bound.key].status is TaskStatus.BOUND
    confirmed = copy.deepcopy(pod)
    confirmed["spec"]["nodeName"] = "n1"
    cache.on_pod("MODIFIED", confirmed)
    assert not cache.assumed
    assert cache.running[bound.key].status is TaskStatus.RUNNING


def test_a_forgotten_pod_gives_its_booking_back() -> None:
    cache = cache_with_node()
    cache.on_pod("ADDED", pod_object("p", {}))
    bound = cache.assume(placed(cache, "p"))
    assert bound is not None
    cache.forget(bound.key)
    assert not cache.ledger.bookings()
    assert not cache.assumed
    assert not cache.pods.frozen().pods


def test_a_placement_that_no_longer_fits_is_not_assumed_and_the_pod_is_tried_again() -> None:
    cache = cache_with_node()
    cache.on_pod("ADDED", pod_object("p", {}))
    task = placed(cache, "p")
    task.placement = Placement(N1, 10**9, 1024)
    cache.queue.failed(task.key, 0.0, error=False)
    assert cache.assume(task) is None
    assert not cache.ledger.bookings()
    assert cache.queue.state(task.key) is QueueState.ACTIVE


def test_a_snapshot_shows_a_binding_pod_with_the_booking_it_holds() -> None:
    cache = cache_with_node()
    cache.on_pod("ADDED", pod_object("p", {}))
    cache.on_pod("ADDED", pod_object("q", {}))
    bound = cache.assume(placed(cache, "p"))
    assert bound is not None
    snapshot, missing = take_snapshot(cache, include_running=False)
    assert missing == []
    tasks = {t.name: t for job in snapshot.jobs.values() for t in job.tasks.values()}
    assert set(tasks) == {"q"}  # p's job has no active pod
    snapshot, _ = take_snapshot(cache, include_running=True)
    tasks = {t.name: t for job in snapshot.jobs.values() for t in job.tasks.values()}
    assert tasks["p"].status is TaskStatus.BINDING
    assert tasks["p"].node == N1
    assert tasks["q"].status is TaskStatus.PENDING


def test_a_snapshot_sees_every_node_event_and_shares_its_node_facts_between_them() -> None:
    cache = cache_with_node()
    first, _ = take_snapshot(cache, include_running=False)
    cache.on_pod("ADDED", pod_object("p", {}))  # pods come and go: the nodes' facts are kept
    again, _ = take_snapshot(cache, include_running=False)
    assert again.meta is first.meta
    assert again.model_ids is first.model_ids
    assert (first.capacity.cpu, first.model_names) == (32000, ["T4"])
    cache.on_node("MODIFIED", node_object("n1", cpu="64"))  # capacity alone: the metadata is the same
    grown, _ = take_snapshot(cache, include_running=False)
    assert grown.meta_version == first.meta_version
    assert grown.capacity.cpu == 64000
    cache.on_node("ADDED", node_object("n2", gpus=4, model="A100"))
    two, _ = take_snapshot(cache, include_running=False)
    assert (two.capacity.cpu, two.capacity.gpu, two.model_names) == (96000, 6000, ["A100", "T4"])
    assert [m.name if m else None for m in two.meta] == ["n1", "n2"]
    assert two.model_ids.tolist() == [1, 0]
    cache.on_node("DELETED", node_object("n1"))
    one, _ = take_snapshot(cache, include_running=False)
    assert (one.capacity.cpu, one.model_names) == (32000, ["A100"])
    assert [m.name if m else None for m in one.meta] == [None, "n2"]
