"""The device plugin's access to the API server, as a small interface.

The real implementation is `runtimekit.kube.nodeapi.KubeNodeApi` (wired by the CLI); tests pass a
fake. `PodView` is the node's pods as a watch keeps them (`runtimekit.kube.nodepods.NodePods`): the
hot path reads it and lists from the server only when it does not help. `KubeletPods` is kubelet's
PodResources, which tells which pod kubelet is admitting. Objects are the API server's JSON, typed
as `runtimekit.kube.objects.Pod`. Failures raise the exceptions of
`runtimekit.kube.errors` (ConflictError when a resourceVersion precondition fails, NotFoundError,
UnavailableError, KubeError).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from runtimekit.api.podresources_client import ListedPod
from runtimekit.kube.objects import Pod


class NodeApi(Protocol):
    def list_node_pods(self, node: str) -> Sequence[Pod]:
        """Every pod bound to `node`, all namespaces; raises rather than return a partial list."""
        ...

    def get_pod(self, namespace: str, name: str) -> Pod:
        """One pod; NotFoundError when it is gone."""
        ...

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], resource_version: str | None
    ) -> Pod:
        """Merge the annotations (None deletes a key). With `resource_version`, the patch applies only if
        the pod is still at that version (else ConflictError). Returns the patched pod."""
        ...

    def patch_node_metadata(
        self, node: str, labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> None:
        """Merge labels and annotations into the node (None deletes a key)."""
        ...


class PodView(Protocol):
    def pods(self) -> Sequence[Pod] | None:
        """The node's pods as last seen (may lag the server a moment); None while not yet known."""
        ...

    def remember(self, pod: Pod) -> None:
        """Take a pod this process just wrote, as the server returned it."""
        ...


class KubeletPods(Protocol):
    def list(self) -> Sequence[ListedPod]:
        """kubelet's PodResources `List` (`runtimekit.api.podresources_client.PodResourcesClient`); raises
        when kubelet does not answer."""
        ...
