"""Owner references as Kubernetes reads them: the one reference marked `controller: true` is the
object's controller (apimachinery's `metav1.GetControllerOf`). Pure; callers: the embedded
cluster's workload controllers and shared informers' owner index (`kube.informers`).
"""

from __future__ import annotations

from collections.abc import Mapping

from runtimekit.kube.objects import OwnerReference, meta


def controller_of(obj: Mapping[str, object]) -> OwnerReference | None:
    """The owner reference marked `controller: true`, or None."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def controller_uid(obj: Mapping[str, object]) -> str:
    """The UID of the object's controller, else ""."""
    ref = controller_of(obj)
    return str(ref.get("uid", "")) if ref is not None else ""
