"""`NodePods` keeps the pods bound to one node from a real (embedded) API server: the first list, then
creates, updates and deletes from the watch; other nodes' pods never show; a write this process made
is seen at once through `remember`, but never brings back a pod the watch saw deleted."""

from __future__ import annotations

import time
from collections.abc import Callable

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.nodeapi import KubeNodeApi

PODS = "/api/v1/namespaces/default/pods"


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def names(view: object) -> set[str] | None:
    pods = view.pods()  # type: ignore[attr-defined]
    return None if pods is None else {p["metadata"]["name"] for p in pods}


def test_follows_the_pods_of_its_node_only(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    http.post(PODS, make_pod("before", node="n1"))
    http.post(PODS, make_pod("elsewhere", node="n2"))
    view = KubeNodeApi(http).node_pods("n1")
    assert view.pods() is None  # not started: nothing is known yet
    view.start()
    try:
        assert view.wait_synced(10)
        assert names(view) == {"before"}
        http.post(PODS, make_pod("after", node="n1"))
        http.post(PODS, make_pod("other", node="n2"))
        assert eventually(lambda: names(view) == {"before", "after"})
        http.patch(f"{PODS}/after", {"metadata": {"annotations": {"k": "v"}}})
        assert eventually(lambda: any(p["metadata"].get("annotations", {}).get("k") == "v" for p in view.pods() or []))
        http.delete(f"{PODS}/before", {"gracePeriodSeconds": 0})
        assert eventually(lambda: names(view) == {"after"})
    finally:
        view.stop()
        http.close()


def test_remember_shows_own_writes_but_not_deleted_pods(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    api = KubeNodeApi(http)
    created = http.post(PODS, make_pod("p", node="n1"))
    view = api.node_pods("n1").start()
    try:
        assert view.wait_synced(10)
        view.informer.stop()  # from here on only `remember` changes what the view holds
        patched = api.patch_pod_annotations("default", "p", {"k": "mine"}, created["metadata"]["resourceVersion"])
        view.remember(patched)
        (seen,) = view.pods() or []
        assert seen["metadata"]["annotations"]["k"] == "mine"
        ghost = {**patched, "metadata": {**patched["metadata"], "name": "ghost", "uid": "uid-ghost"}}
        view.remember(ghost)  # never seen by the watch (or already deleted): not added
        assert names(view) == {"p"}
    finally:
        view.stop()
        http.close()


def test_the_same_pod_event_again_bumps_its_count(apiserver: ApiServer) -> None:
    http = KubeHttp.connect(server=apiserver.url)
    api = KubeNodeApi(http)
    for _ in range(3):
        api.record_pod_event("default", "p", "uid-p", "Warning", "GPUShareExceeded", "over its share")
    api.record_pod_event("default", "p", "uid-p", "Warning", "GPUShareExceeded", "another message")
    events = http.list("/api/v1/namespaces/default/events")[0]
    counts = sorted((e["message"], e["count"]) for e in events)
    assert counts == [("another message", 1), ("over its share", 3)]
    http.delete(f"/api/v1/namespaces/default/events/{events[0]['metadata']['name']}")
    api.record_pod_event("default", "p", "uid-p", "Warning", "GPUShareExceeded", events[0]["message"])
    again = [e for e in http.list("/api/v1/namespaces/default/events")[0] if e["message"] == events[0]["message"]]
    assert [e["count"] for e in again] == [1]  # the counted Event expired: a new one
