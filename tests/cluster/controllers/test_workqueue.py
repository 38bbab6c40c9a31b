"""The controllers' plumbing: the work queue's timers and the informer cache's guard against stale
versions (what kube's workqueue and shared informer caches guarantee)."""

from __future__ import annotations

from typing import Any

from runtimekit.cluster.controllers.informers import ObjectCache, controller_uid
from runtimekit.cluster.controllers.workqueue import DelayQueue


def test_a_key_waits_once_and_keeps_its_earliest_timer() -> None:
    queue = DelayQueue()
    queue.add("b")
    queue.add("b")
    queue.add_after("a", 0.05)
    queue.add_after("a", 3600)  # later than the timer it has: no second timer
    queue.add_after("c", 3600)
    queue.add_after("c", 0.01)  # earlier: replaces the hour
    assert queue.get() == "b"
    assert sorted([queue.get(), queue.get()]) == ["a", "c"]
    queue.add("d")
    assert queue.get() == "d"  # neither "a" nor "c" comes back
    queue.close()
    assert queue.get() is None


def obj(name: str, rv: int, uid: str = "u1", owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "ReplicaSet", "name": "rs"}]
    return {"metadata": meta}


def test_the_cache_never_goes_back_to_an_older_version() -> None:
    cache = ObjectCache()
    added = cache.apply("ADDED", obj("p", 5, owner="rs-1"))
    assert added is not None
    assert added.kind == "ADDED"
    cache.written(obj("p", 9, owner="rs-1"))  # our own write's answer, ahead of the watch
    assert cache.apply("MODIFIED", obj("p", 7)) is None  # the watch catching up: stale
    assert cache.get("ns/p")["metadata"]["resourceVersion"] == "9"  # type: ignore[index]
    assert [controller_uid(o) for o in cache.owned("rs-1")] == ["rs-1"]
    cache.removed(obj("p", 12))
    assert cache.get("ns/p") is None
    assert cache.apply("MODIFIED", obj("p", 10)) is None  # an event from before the deletion
    assert cache.owned("rs-1") == []
    reborn = cache.apply("ADDED", obj("p", 13, uid="u2"))  # a new object under the name
    assert reborn is not None
    assert cache.apply("DELETED", obj("p", 14, uid="u1")) is None  # the old one's deletion is not the new one's
    assert cache.get("ns/p") is not None
