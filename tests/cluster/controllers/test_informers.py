"""The controllers' plumbing: the informer cache's guard against stale versions (what kube's shared
informer caches guarantee) and the one timer a controller keeps per key."""

from __future__ import annotations

from typing import Any

from runtimekit.cluster.controllers.base import Controller
from runtimekit.cluster.controllers.informers import Informers, ObjectCache, controller_uid
from runtimekit.kube.http import KubeHttp


class Timers:
    """Stands in for the work queue: records the delays asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float]] = []

    def add_after(self, key: str, delay: float) -> None:
        self.asked.append((key, delay))


def test_a_controller_keeps_the_earliest_timer_of_a_key() -> None:
    http = KubeHttp.connect(server="http://127.0.0.1:9")  # never called
    controller = Controller(http, Informers(http))
    timers = Timers()
    controller.queue = timers  # type: ignore[assignment]
    controller.requeue_after("a", 600)
    controller.requeue_after("a", 600)  # already due then: nothing new
    controller.requeue_after("a", 2)  # earlier: a new timer
    controller.requeue_after("a", 300)  # later than the 2 s one: nothing new
    controller.requeue_after("b", 5)
    assert timers.asked == [("a", 600), ("a", 2), ("b", 5)]
    http.close()


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
