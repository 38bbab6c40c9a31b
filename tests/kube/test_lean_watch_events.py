"""`jsoncodec.loads_event_lean`, the scheduler's decoder of pod and node watch events: what it gives
is what `loads` and `strip_managed_fields` give together (every other field of ObjectMeta, the spec
and the status kept whole; bookmarks and ERROR Status events as they are), on hand-made lines and
on what the embedded API server sends an informer for pods and nodes; what is not a JSON object
raises ValueError as `loads` does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube import jsoncodec
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer, strip_managed_fields

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"

# every field of ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), each set
FULL_META: dict[str, Any] = {
    "name": "p",
    "generateName": "p-",
    "namespace": "default",
    "selfLink": "/api/v1/namespaces/default/pods/p",
    "uid": "u-1",
    "resourceVersion": "7",
    "generation": 2,
    "creationTimestamp": "2026-12-05T00:00:00Z",
    "deletionTimestamp": "2026-12-05T00:01:00Z",
    "deletionGracePeriodSeconds": 30,
    "labels": {"app": "db"},
    "annotations": {"a": "1"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-0"}],
    "finalizers": ["example.com/f"],
    "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {}}}}],
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": FULL_META,
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}]},
}
LINES = {
    "pod": {"type": "MODIFIED", "object": POD},
    "no managed fields": {"type": "ADDED", "object": {**POD, "metadata": {"name": "p", "namespace": "default"}}},
    "bookmark": {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}},
    "error": {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "too old resource version: 1 (9)",
            "reason": "Expired",
            "code": 410,
            "details": {"causes": []},
        },
    },
    "no object": {"type": "ADDED"},
}


def plain(line: bytes) -> Any:
    event = jsoncodec.loads(line)
    if isinstance(event.get("object"), dict):
        strip_managed_fields(event["object"])
    return event


@pytest.mark.parametrize("name", list(LINES))
def test_a_lean_event_is_the_event_without_its_managed_fields(name: str) -> None:
    line = jsoncodec.dumps(LINES[name])
    lean = jsoncodec.loads_event_lean(line)
    assert lean == plain(line)
    if name == "pod":
        assert lean["object"]["metadata"] == {k: v for k, v in FULL_META.items() if k != "managedFields"}


@pytest.mark.parametrize("line", [b"", b"{", b"[1]", b'{"type":"ADDED","object":[]}', b'{"object":{"metadata":1}}'])
def test_what_is_not_an_event_object_raises_value_error(line: bytes) -> None:
    with pytest.raises(ValueError, match=r"."):
        jsoncodec.loads_event_lean(line)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_informers_with_the_lean_decoder_see_what_the_stripping_ones_see() -> None:
    seen: dict[str, list[tuple[str, Any]]] = {"lean": [], "plain": []}
    lock = threading.Lock()

    def into(name: str) -> Callable[[str, Any], None]:
        def handler(kind: str, obj: Any) -> None:
            with lock:
                seen[name].append((kind, obj))

        return handler

    informers: list[Informer[Any]] = []
    try:
        with ApiServer() as server:
            http = KubeHttp.connect(server=server.url)
            for path in (PODS, NODES):
                lean = jsoncodec.loads_event_lean
                informers += [
                    Informer(http, path, into("lean"), transform=strip_managed_fields, decode=lean).start(),
                    Informer(http, path, into("plain"), transform=strip_managed_fields).start(),
                ]
            assert all(informer.synced.wait(30.0) for informer in informers)
            http.post(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}})
            http.post(PODS, make_pod("p", labels={"app": "db"}, annotations={"x": "1"}))
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"y": "2"}}}
            http.post(f"{PODS}/p/binding", {**binding, "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
            http.patch(f"{PODS}/p", {"metadata": {"labels": {"app": "web"}}}, "merge")
            http.delete(f"{PODS}/p")
            wait_for(lambda: len(seen["lean"]) >= 5 and len(seen["plain"]) >= 5)
            time.sleep(0.2)
    finally:  # after the server: its stop ends the watches, so the informers stop at once
        for informer in informers:
            informer.stop()
    by_kind = {
        name: sorted((kind, obj.get("kind", ""), jsoncodec.dumps(obj)) for kind, obj in events)
        for name, events in seen.items()
    }
    assert by_kind["lean"] == by_kind["plain"]
    assert [kind for kind, obj in seen["lean"] if obj["metadata"]["name"] == "p"] == [
        "ADDED",
        "MODIFIED",
        "MODIFIED",
        "DELETED",
    ]
    assert all("managedFields" not in obj["metadata"] for _, obj in seen["lean"])
