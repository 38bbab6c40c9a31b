"""The pods bound to one node, kept current by a watch: what a node daemon reads on its hot path.

A device plugin answers kubelet's Allocate by finding the pod it is for among the node's pods; listing
them from the API server on every call costs a round trip and the decoding of every pod on the node.
`NodePods` lists once, then follows a watch (`Informer`: bookmarks, re-list on 410 Gone, backoff),
with the field selector `spec.nodeName=<node>` kubelet itself uses. `pods()` is None until the first
list has arrived, so callers fall back to a fresh list; a reader that acts on what it saw must still
guard its write with the object's resourceVersion, since a watch may lag the server by a moment.
`remember` takes the object a write returned, so this process sees its own writes at once.
"""

from __future__ import annotations

import threading

from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import Pod, meta, object_key


class NodePods:
    """See the module docstring. Thread-safe; objects handed out must not be modified."""

    def __init__(self, http: KubeHttp, node: str, watch_timeout: int = 300) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._pods: dict[str, Pod] = {}
        self.informer = Informer(
            http,
            object_path("v1", "pods"),
            self._on_event,
            {"fieldSelector": f"spec.nodeName={node}"},
            name=f"pods of node {node}",
            watch_timeout=watch_timeout,
        )

    def start(self) -> NodePods:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    def wait_synced(self, timeout_s: float) -> bool:
        return self.informer.synced.wait(timeout_s)

    def pods(self) -> list[Pod] | None:
        """The node's pods as last seen; None before the first list."""
        if not self.informer.synced.is_set():
            return None
        with self._lock:
            return list(self._pods.values())

    def remember(self, pod: Pod) -> None:
        """Take a pod this process just wrote (the server's answer), unless the watch has seen it go."""
        key = object_key(pod)
        uid = meta(pod).get("uid")
        with self._lock:
            known = self._pods.get(key)
            if known is not None and meta(known).get("uid") == uid:
                self._pods[key] = pod

    def _on_event(self, kind: str, pod: Pod) -> None:
        key = object_key(pod)
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(key, None)
            elif (pod.get("spec") or {}).get("nodeName") == self.node:
                self._pods[key] = pod
