"""The API-server calls a node daemon needs: list the pods bound to its node, patch pod and node metadata.

`KubeNodeApi` implements, structurally, the small interfaces the device plugin
(`runtimekit.deviceplugin.kubeapi.NodeApi`) and the runtime (`runtimekit.runtime.pods.PodSource`)
declare. Objects come back as plain dicts shaped like the API server's JSON. Every failure is
raised as a `runtimekit.kube.errors` exception (ConflictError for a failed resourceVersion
precondition, NotFoundError, UnavailableError, KubeError).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx2
from lightkube import ALL_NS, ApiError, Client
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from runtimekit.kube.errors import ConflictError, KubeError, NotFoundError, UnavailableError

T = TypeVar("T")


def _translate(call: Callable[[], T], what: str) -> T:
    try:
        return call()
    except ApiError as exc:
        code = exc.status.code or 0
        message = f"{what}: {code} {exc.status.message or ''}".strip()
        if code == 409:
            raise ConflictError(message) from exc
        if code == 404:
            raise NotFoundError(message) from exc
        if code >= 500 or code == 429:
            raise UnavailableError(message) from exc
        raise KubeError(message) from exc
    except httpx2.TransportError as exc:
        raise UnavailableError(f"{what}: {exc}") from exc


def metadata_patch(
    labels: Mapping[str, str | None] | None,
    annotations: Mapping[str, str | None] | None,
    resource_version: str | None,
) -> dict[str, Any]:
    """A JSON merge patch of metadata; a None value deletes the key; a resourceVersion makes it conditional."""
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta}


class KubeNodeApi:
    """See the module docstring."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list_node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to `node`, in all namespaces."""

        def call() -> list[dict[str, Any]]:
            pods = self._client.list(Pod, namespace=ALL_NS, fields={"spec.nodeName": node})
            return [pod.to_dict() for pod in pods]

        return _translate(call, f"list pods of node {node}")

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return _translate(
            lambda: self._client.get(Pod, name, namespace=namespace).to_dict(), f"get pod {namespace}/{name}"
        )

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch a pod's annotations; with `resource_version`, only if the pod is still at it."""
        body = metadata_patch(None, annotations, resource_version)

        def call() -> dict[str, Any]:
            pod = self._client.patch(Pod, name, body, namespace=namespace, patch_type=PatchType.MERGE)
            return pod.to_dict()

        return _translate(call, f"patch pod {namespace}/{name}")

    def get_node(self, node: str) -> dict[str, Any]:
        return _translate(lambda: self._client.get(Node, node).to_dict(), f"get node {node}")

    def patch_node_metadata(
        self, node: str, labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> None:
        """Merge-patch a node's labels and annotations."""
        body = metadata_patch(labels, annotations, None)
        _translate(lambda: self._client.patch(Node, node, body, patch_type=PatchType.MERGE), f"patch node {node}")
