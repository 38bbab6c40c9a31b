"""The live cache's storage objects: the store the informers feed (a catalog per change, a wait for
the next change), the handlers that move waiting pods, and what PreBind reads of the cluster."""

from __future__ import annotations

import threading
import time

from runtimekit.model import NodeName, PodKey
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.volumes import CLAIMS, CLASSES, CSINODES, VOLUMES, LiveVolumes, VolumeStore
from runtimekit.scheduler.scheduling_queue import SchedulingQueue
from scheduler.fake_api import FakeApi, P, node_object, pod_object
from scheduler.kubesem.volume_builders import csinode, pv, pvc, sc


def test_the_store_hands_out_one_catalog_per_change() -> None:
    store = VolumeStore()
    empty = store.frozen()
    assert empty.claims == {}
    store.apply(CLAIMS, "ADDED", pvc("a"))  # type: ignore[arg-type]
    store.apply(VOLUMES, "ADDED", pv("v"))  # type: ignore[arg-type]
    store.apply(CLASSES, "ADDED", sc("c"))  # type: ignore[arg-type]
    store.apply(CSINODES, "ADDED", csinode("n1", {"d": 2}))  # type: ignore[arg-type]
    first = store.frozen()
    assert store.frozen() is first
    assert first.claim("testns", "a") is not None
    assert first.volume("v") is not None
    assert first.storage_class("c") is not None
    assert first.csinode("n1") is not None
    store.apply(VOLUMES, "DELETED", pv("v"))  # type: ignore[arg-type]
    second = store.frozen()
    assert second is not first
    assert second.volume("v") is None
    assert first.volume("v") is not None  # a catalog handed out never changes
    store.apply(VOLUMES, "DELETED", pv("v"))  # type: ignore[arg-type]
    assert store.frozen() is second  # deleting what is gone changes nothing


def test_wait_wakes_on_the_next_change_or_times_out() -> None:
    store = VolumeStore()
    started = time.monotonic()
    store.wait(store.version, 0.05)
    assert time.monotonic() - started >= 0.04
    version = store.version
    timer = threading.Timer(0.05, lambda: store.apply(CLAIMS, "ADDED", pvc("a")))  # type: ignore[arg-type]
    timer.start()
    store.wait(version, 5.0)
    assert store.version > version
    timer.join()


def test_a_closed_store_ends_waits_at_once() -> None:
    store = VolumeStore()
    assert store.wait(store.version, 0.0) is True
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(store.wait(store.version, 30.0)))
    waiter.start()
    time.sleep(0.05)
    store.close()  # the scheduler stops
    waiter.join(5.0)
    assert waited == [False]
    assert store.wait(store.version, 30.0) is False


def test_storage_events_move_waiting_pods_and_fill_the_sessions_catalog() -> None:
    queue = SchedulingQueue(threading.RLock())
    cache = ClusterCache(P, P.scheduler_name, queue)
    generation = queue.generation
    cache.on_volumes(CLAIMS)("ADDED", pvc("a"))  # type: ignore[arg-type]
    assert queue.generation == generation + 1
    assert cache.volumes.frozen().claim("testns", "a") is not None


def test_live_volumes_read_the_cluster_cache_and_write_through_the_writer() -> None:
    api = FakeApi()
    queue = SchedulingQueue(threading.RLock())
    cache = ClusterCache(P, P.scheduler_name, queue)
    api.attach(cache)
    api.add_node(node_object("n1"))
    cache.on_node("ADDED", api.nodes["n1"])
    api.add_pod(pod_object("p", {}))
    (entry,) = cache.queue

    class Writer:
        def __init__(self) -> None:
            self.written: list[str] = []

        def update_volume(self, volume):  # type: ignore[no-untyped-def]
            self.written.append(volume["metadata"]["name"])
            return volume

        def update_claim(self, claim):  # type: ignore[no-untyped-def]
            self.written.append(claim["metadata"]["name"])
            return claim

    writer = Writer()
    access = LiveVolumes(cache.volumes, cache, writer)
    assert access.node_labels("n1") is not None
    assert access.node_labels("gone") is None
    assert access.pod_exists(entry.task.key)
    assert not access.pod_exists(PodKey("nobody"))
    access.update_volume(pv("v"))
    access.update_claim(pvc("a"))
    assert writer.written == ["v", "a"]
    assert cache.node_labels(NodeName("n1")) == access.node_labels("n1")
