"""Shared informers' cache: the guard against stale versions (what kube's shared informer caches
guarantee), named indexes (the controller-owner index among them) and typed changes."""

from __future__ import annotations

from typing import Any

import pytest

from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informers import BY_CONTROLLER, Change, Informers, ObjectCache, controller_uids
from runtimekit.kube.objects import Pod
from runtimekit.kube.semantics.owners import controller_uid


def obj(name: str, rv: int, uid: str = "u1", owner: str = "", node: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "ReplicaSet", "name": "rs"}]
    return {"metadata": meta, "spec": {"nodeName": node}} if node else {"metadata": meta}


def owned_cache() -> ObjectCache[dict[str, Any]]:
    cache: ObjectCache[dict[str, Any]] = ObjectCache()
    cache.add_indexer(BY_CONTROLLER, controller_uids)
    return cache


def test_the_cache_never_goes_back_to_an_older_version() -> None:
    cache = owned_cache()
    added = cache.apply("ADDED", obj("p", 5, owner="rs-1"))
    assert added is not None
    assert added.kind == "ADDED"
    cache.written(obj("p", 9, owner="rs-1"))  # our own write's answer, ahead of the watch
    assert cache.apply("MODIFIED", obj("p", 7)) is None  # the watch catching up: stale
    assert cache.get("ns/p")["metadata"]["resourceVersion"] == "9"  # type: ignore[index]
    assert [controller_uid(o) for o in cache.by_index(BY_CONTROLLER, "rs-1")] == ["rs-1"]
    cache.removed(obj("p", 12))
    assert cache.get("ns/p") is None
    assert cache.apply("MODIFIED", obj("p", 10)) is None  # an event from before the deletion
    assert cache.by_index(BY_CONTROLLER, "rs-1") == []
    reborn = cache.apply("ADDED", obj("p", 13, uid="u2"))  # a new object under the name
    assert reborn is not None
    assert cache.apply("DELETED", obj("p", 14, uid="u1")) is None  # the old one's deletion is not the new one's
    assert cache.get("ns/p") is not None


def _node(pod: dict[str, Any]) -> tuple[str, ...]:
    node = (pod.get("spec") or {}).get("nodeName")
    return (node,) if node else ()


def test_an_index_follows_every_change_and_files_what_the_cache_held_before() -> None:
    cache: ObjectCache[dict[str, Any]] = ObjectCache()
    cache.apply("ADDED", obj("a", 1, uid="a", node="n1"))
    cache.add_indexer("node", _node)  # added late: files what is there
    cache.apply("ADDED", obj("b", 2, uid="b", node="n1"))
    assert sorted(o["metadata"]["name"] for o in cache.by_index("node", "n1")) == ["a", "b"]
    cache.apply("MODIFIED", obj("a", 3, uid="a", node="n2"))  # moved: filed under its new value only
    assert [o["metadata"]["name"] for o in cache.by_index("node", "n1")] == ["b"]
    assert [o["metadata"]["name"] for o in cache.by_index("node", "n2")] == ["a"]
    cache.apply("DELETED", obj("b", 4, uid="b"))
    assert cache.by_index("node", "n1") == []
    assert cache.by_index("node", "unknown") == []


def test_an_indexer_name_is_taken_once() -> None:
    cache = owned_cache()
    cache.add_indexer(BY_CONTROLLER, controller_uids)  # the same again: nothing happens
    with pytest.raises(ValueError, match="exists already"):
        cache.add_indexer(BY_CONTROLLER, _node)
    with pytest.raises(KeyError):
        cache.by_index("never added", "x")


def test_a_shared_informer_is_typed_and_hands_its_handlers_the_changes() -> None:
    http = KubeHttp.connect(server="http://127.0.0.1:9")  # never called: events are fed by hand
    informers = Informers(http)
    pods = informers.resource("/api/v1/pods", Pod)
    assert informers.resource("/api/v1/pods") is pods  # one per path
    seen: list[Change[Pod]] = []
    pods.on(seen.append)
    pods.add_indexer(BY_CONTROLLER, controller_uids)
    first: Pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1"}}
    pods.informer.handler("ADDED", first)
    pods.informer.handler("MODIFIED", first)  # the same version again is handed on; only older ones are not
    later: Pod = {"metadata": {**first["metadata"], "resourceVersion": "2"}}
    pods.informer.handler("MODIFIED", later)
    pods.informer.handler("DELETED", later)
    assert [(c.kind, c.old, c.new) for c in seen] == [
        ("ADDED", None, first),
        ("MODIFIED", first, first),
        ("MODIFIED", first, later),
        ("DELETED", later, None),
    ]
    assert seen[-1].obj is later
    http.close()
