"""The API-server calls a node daemon needs: list the pods bound to its node, patch pod and node metadata.

`KubeNodeApi` implements, structurally, the small interfaces the device plugin
(`runtimekit.deviceplugin.kubeapi.NodeApi`) and the runtime (`runtimekit.runtime.pods.PodSource`)
declare. It sends raw JSON through `KubeHttp` (lightkube's connection config, no typed models), so
objects come back exactly as the server wrote them, fields a model would not know included, typed
(`kube.objects.Pod`, `Node`) without being copied or checked. Every
failure is raised as a `runtimekit.kube.errors` exception (ConflictError for a failed
resourceVersion precondition, NotFoundError, UnavailableError, ...), its message prefixed with
what was being done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar, cast

from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import event_body
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.nodepods import NodePods
from runtimekit.kube.objects import JsonObject, Node, Pod

T = TypeVar("T")
EVENT_CACHE_SIZE = 4096  # Events remembered for counting again, as client-go's EventCorrelator keeps
log = logging.getLogger(__name__)


def _translate(call: Callable[[], T], what: str) -> T:
    try:
        return call()
    except KubeError as exc:
        raise exc.with_context(what) from exc


def metadata_patch(
    labels: Mapping[str, str | None] | None,
    annotations: Mapping[str, str | None] | None,
    resource_version: str | None,
) -> JsonObject:
    """A JSON merge patch of metadata; a None value deletes the key; a resourceVersion makes it conditional."""
    meta: JsonObject = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


class KubeNodeApi:
    """See the module docstring. Thread-safe (KubeHttp is)."""

    def __init__(self, http: KubeHttp) -> None:
        self._http = http
        self._events: dict[tuple[str, ...], tuple[str, int]] = {}  # Event -> its name and count (insertion order)
        self._events_lock = threading.Lock()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, timeout_s: float = 10.0) -> KubeNodeApi:
        """A kubeconfig file, an `http(s)://` server URL, or None for in-cluster / the default kubeconfig."""
        if kubeconfig is not None and kubeconfig.startswith(("http://", "https://")):
            return cls(KubeHttp.connect(server=kubeconfig, timeout=timeout_s, user_agent="runtimekit-node"))
        return cls(KubeHttp.connect(kubeconfig=kubeconfig, timeout=timeout_s, user_agent="runtimekit-node"))

    def close(self) -> None:
        self._http.close()

    def list_node_pods(self, node: str) -> list[Pod]:
        """Every pod bound to `node`, in all namespaces."""
        params = {"fieldSelector": f"spec.nodeName={node}"}
        pods = _translate(lambda: self._http.list(object_path("v1", "pods"), params)[0], f"list pods of node {node}")
        return cast(list[Pod], pods)

    def record_pod_event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        """Write an Event about a pod, as the node runtime (best effort: a refusal is logged). The same
        Event again counts on the one written before (`count`, `lastTimestamp`), as client-go's
        EventCorrelator does; a new one is written when that one is gone (expired, deleted)."""
        key = (namespace, name, uid, kind, reason, message)
        with self._events_lock:
            seen = self._events.get(key)
        if seen is not None:
            bump = {"count": seen[1] + 1, "lastTimestamp": rfc3339()}
            try:
                self._http.patch(object_path("v1", "events", namespace, seen[0]), bump)
            except KubeError as exc:
                log.debug("could not count event %s again, writing a new one: %s", seen[0], exc)
            else:
                with self._events_lock:
                    self._events[key] = (seen[0], seen[1] + 1)
                return
        involved = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid}
        body = event_body(involved, namespace, "runtimekit-runtime", kind, reason, message)
        try:
            self._http.post(object_path("v1", "events", namespace), body)
        except KubeError as exc:
            log.info("could not record event %s on pod %s/%s: %s", reason, namespace, name, exc)
            return
        with self._events_lock:
            self._events[key] = (body["metadata"]["name"], 1)
            while len(self._events) > EVENT_CACHE_SIZE:
                del self._events[next(iter(self._events))]  # the oldest first

    def node_pods(self, node: str) -> NodePods:
        """A watch-kept view of the pods bound to `node` (not started)."""
        return NodePods(self._http, node)

    def get_pod(self, namespace: str, name: str) -> Pod:
        pod = _translate(
            lambda: self._http.get(object_path("v1", "pods", namespace, name)), f"get pod {namespace}/{name}"
        )
        return cast(Pod, pod)

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> Pod:
        """Merge-patch a pod's annotations; with `resource_version`, only if the pod is still at it."""
        body = metadata_patch(None, annotations, resource_version)
        path = object_path("v1", "pods", namespace, name)
        return cast(Pod, _translate(lambda: self._http.patch(path, body), f"patch pod {namespace}/{name}"))

    def get_node(self, node: str) -> Node:
        node_object = _translate(lambda: self._http.get(object_path("v1", "nodes", name=node)), f"get node {node}")
        return cast(Node, node_object)

    def patch_node_metadata(
        self, node: str, labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> None:
        """Merge-patch a node's labels and annotations."""
        body = metadata_patch(labels, annotations, None)
        _translate(lambda: self._http.patch(object_path("v1", "nodes", name=node), body), f"patch node {node}")
