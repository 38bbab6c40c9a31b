"""An informer with `transform=strip_managed_fields` (client-go's TransformStripManagedFields, which
kube-scheduler sets on its informers) hands its handler objects without `metadata.managedFields`,
from the list and from the watch; everything else is as the API server sent it, and an informer
without the transform still sees the managed fields."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from fixtures.apiserver import make_pod
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.informer import Informer, strip_managed_fields

PODS = "/api/v1/namespaces/default/pods"


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_strip_managed_fields_drops_them_from_listed_and_watched_objects_only() -> None:
    stripped: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    lock = threading.Lock()

    def into(seen: dict[str, Any]) -> Callable[[str, Any], None]:
        def handler(kind: str, obj: Any) -> None:
            with lock:
                seen[obj["metadata"]["name"]] = obj

        return handler

    informers: list[Informer[Any]] = []
    try:
        with ApiServer() as server:
            http = KubeHttp.connect(server=server.url)
            listed = http.post(PODS, make_pod("listed"))
            assert listed["metadata"]["managedFields"]  # the server records them on every write
            informers += [
                Informer(http, PODS, into(stripped), name="stripped", transform=strip_managed_fields).start(),
                Informer(http, PODS, into(kept), name="kept").start(),
            ]
            assert all(informer.synced.wait(30.0) for informer in informers)
            watched = http.post(PODS, make_pod("watched"))
            wait_for(lambda: {"listed", "watched"} <= set(stripped) and {"listed", "watched"} <= set(kept))
    finally:  # after the server: its stop ends the watches, so the informers stop at once
        for informer in informers:
            informer.stop()
    for name, sent in (("listed", listed), ("watched", watched)):
        assert kept[name] == sent
        assert "managedFields" not in stripped[name]["metadata"]
        expected = dict(sent, metadata={k: v for k, v in sent["metadata"].items() if k != "managedFields"})
        assert stripped[name] == expected
