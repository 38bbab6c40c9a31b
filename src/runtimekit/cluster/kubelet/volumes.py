"""What the simulated kubelet waits for before it starts a pod's containers: its volumes, as
kubelet's volume manager does (`WaitForAttachAndMount`). A pod's PersistentVolumeClaims must exist
and be Bound (bound to a volume by the PV controller); its ConfigMap and Secret volumes must name
objects that exist, unless marked `optional`. `unready_volumes` says, in kubelet's words (its
`FailedMount` Events), what is not ready yet, or None when every volume is. Pods without such
volumes cost nothing: no API call is made for them. Callers: `SimulatedKubelet`.
"""

from __future__ import annotations

from collections.abc import Callable

from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import JsonObject, Pod, meta

Get = Callable[[str], JsonObject | None]


def api_reader(http: KubeHttp) -> Get:
    """A GET that answers None for an object that does not exist."""

    def get(path: str) -> JsonObject | None:
        try:
            return http.get(path)
        except KubeError as exc:
            if exc.code == 404:
                return None
            raise

    return get


def unready_volumes(pod: Pod, get: Get) -> str | None:
    """Why the pod's volumes cannot be mounted yet (None: they can)."""
    namespace = str(meta(pod).get("namespace") or "default")
    pod_name = str(meta(pod).get("name", ""))
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = str(volume.get("name", ""))
        claim_name = ""
        if volume.get("persistentVolumeClaim") is not None:
            claim_name = str((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            claim_name = f"{pod_name}-{name}"
        if claim_name:
            claim = get(object_path("v1", "persistentvolumeclaims", namespace, claim_name))
            problem = (
                f'failed to fetch PVC from API server: persistentvolumeclaims "{claim_name}" not found'
                if claim is None
                else ("PVC is not bound" if (claim.get("status") or {}).get("phase") != "Bound" else "")
            )
            if problem:
                return (
                    f"Unable to attach or mount volumes: unmounted volumes=[{name}], unattached volumes=[{name}]: "
                    f"error processing PVC {namespace}/{claim_name}: {problem}"
                )
            continue
        for field, plural, key, kind in (
            ("configMap", "configmaps", "name", "configmap"),
            ("secret", "secrets", "secretName", "secret"),
        ):
            source = volume.get(field)
            if not isinstance(source, dict) or source.get("optional"):
                continue
            wanted = str(source.get(key) or "")
            if get(object_path("v1", plural, namespace, wanted)) is None:
                return f'MountVolume.SetUp failed for volume "{name}" : {kind} "{wanted}" not found'
    return None
