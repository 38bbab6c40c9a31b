"""The API-server calls of the DRA kubelet plugin: read a claim, keep the node's ResourceSlices,
install DeviceClasses.

`KubeDraApi` implements, structurally, the interfaces `runtimekit.draplugin` declares. Raw JSON through
`KubeHttp`, as `nodeapi.py` does; every failure is a `runtimekit.kube.errors` exception with what was
being done.
"""

from __future__ import annotations

from typing import cast

from runtimekit.kube.errors import ConflictError, KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import Node
from runtimekit.kube.objects.dra import DeviceClass, ResourceClaim, ResourceSlice

API = "resource.k8s.io/v1"


class KubeDraApi:
    """See the module docstring. Thread-safe (KubeHttp is)."""

    def __init__(self, http: KubeHttp) -> None:
        self._http = http

    @classmethod
    def connect(cls, kubeconfig: str | None = None, timeout_s: float = 10.0) -> KubeDraApi:
        """A kubeconfig file, an `http(s)://` server URL, or None for in-cluster / the default kubeconfig."""
        if kubeconfig is not None and kubeconfig.startswith(("http://", "https://")):
            return cls(KubeHttp.connect(server=kubeconfig, timeout=timeout_s, user_agent="runtimekit-dra-plugin"))
        return cls(KubeHttp.connect(kubeconfig=kubeconfig, timeout=timeout_s, user_agent="runtimekit-dra-plugin"))

    def close(self) -> None:
        self._http.close()

    def get_claim(self, namespace: str, name: str) -> ResourceClaim:
        try:
            return cast(ResourceClaim, self._http.get(object_path(API, "resourceclaims", namespace, name)))
        except KubeError as exc:
            raise exc.with_context(f"get ResourceClaim {namespace}/{name}") from exc

    def get_node(self, node: str) -> Node:
        try:
            return cast(Node, self._http.get(object_path("v1", "nodes", name=node)))
        except KubeError as exc:
            raise exc.with_context(f"get node {node}") from exc

    def list_slices(self, driver: str, node: str) -> list[ResourceSlice]:
        """The slices of `driver` on `node` (the fields kube's slice strategy selects; checked here again)."""
        params = {"fieldSelector": f"spec.nodeName={node},spec.driver={driver}"}
        try:
            items, _ = self._http.list(object_path(API, "resourceslices"), params)
        except KubeError as exc:
            raise exc.with_context("list ResourceSlices") from exc
        slices = cast(list[ResourceSlice], items)
        return [s for s in slices if s.get("spec", {}).get("driver") == driver and s["spec"].get("nodeName") == node]

    def create_slice(self, body: ResourceSlice) -> ResourceSlice:
        try:
            return cast(ResourceSlice, self._http.post(object_path(API, "resourceslices"), body))
        except KubeError as exc:
            raise exc.with_context(f"create ResourceSlice {body['metadata'].get('name')}") from exc

    def update_slice(self, body: ResourceSlice) -> ResourceSlice:
        name = body["metadata"].get("name", "")
        try:
            return cast(ResourceSlice, self._http.put(object_path(API, "resourceslices", name=name), body))
        except KubeError as exc:
            raise exc.with_context(f"update ResourceSlice {name}") from exc

    def delete_slice(self, name: str) -> None:
        try:
            self._http.delete(object_path(API, "resourceslices", name=name))
        except KubeError as exc:
            raise exc.with_context(f"delete ResourceSlice {name}") from exc

    def ensure_device_class(self, body: DeviceClass) -> bool:
        """Create the DeviceClass unless one of its name exists (an admin's own is kept); True when created."""
        try:
            self._http.post(object_path(API, "deviceclasses"), body)
        except ConflictError as exc:
            if exc.reason != "AlreadyExists":
                raise exc.with_context(f"create DeviceClass {body['metadata'].get('name')}") from exc
            return False
        except KubeError as exc:
            raise exc.with_context(f"create DeviceClass {body['metadata'].get('name')}") from exc
        return True
