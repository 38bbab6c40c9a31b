"""An informer whose watch ends with 410 Expired (its resourceVersion fell out of the API server's
history: a watch closed while it was behind, or cut off for reading too slowly) lists again and
reconciles: what changed meanwhile arrives as ADDED, MODIFIED and DELETED, and it watches on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.deletion import DeleteOptions, delete
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer

PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_an_informer_lists_again_when_its_watch_ends_with_410_expired() -> None:
    seen: dict[str, str] = {}
    changes: list[tuple[str, str]] = []
    lock = threading.Lock()

    def handler(kind: str, obj: Any) -> None:
        name = obj["metadata"]["name"]
        with lock:
            changes.append((kind, name))
            if kind == "DELETED":
                seen.pop(name, None)
            else:
                seen[name] = obj["metadata"].get("labels", {}).get("v", "")

    with ApiServer(history_size=5) as server:
        pods = server.api.resource("", "v1", "pods")
        for name in ("kept", "changed", "deleted"):
            server.api.create(pods, "default", make_pod(name))
        informer = Informer(KubeHttp.connect(server=server.url), PODS, handler, name="pods").start()
        try:
            assert informer.synced.wait(30.0)
            server.stop()  # the watch ends; meanwhile more happens than the history keeps
            server.api.patch(pods, "default", "changed", MERGE, b'{"metadata":{"labels":{"v":"2"}}}')
            delete(server.api, pods, "default", "deleted", DeleteOptions.parse(None, {}))
            for i in range(10):
                server.api.create(pods, "default", make_pod(f"new-{i}"))
            server.start()
            wait_for(lambda: informer.relists >= 2 and len(seen) == 12)
            assert seen["changed"] == "2"
            assert "deleted" not in seen
            assert ("DELETED", "deleted") in changes
            server.api.create(pods, "default", make_pod("after"))  # and it watches on
            wait_for(lambda: "after" in seen)
        finally:
            informer.stop()
