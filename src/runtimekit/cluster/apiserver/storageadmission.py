"""kube-apiserver's DefaultStorageClass admission: a PersistentVolumeClaim created without a class
(no `spec.storageClassName` at all, and no beta class annotation; an empty name is a choice of no
class and stays) gets the default StorageClass, the one annotated
`storageclass.kubernetes.io/is-default-class: "true"` (the newest when several are, then by name).
Pure; called by `operations.py` when a claim is created.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtimekit.kube.objects import PersistentVolumeClaim, StorageClass, annotations_of, meta
from runtimekit.kube.semantics.volumes import ANN_BETA_STORAGE_CLASS, is_default_class


def default_class(classes: Iterable[StorageClass]) -> str | None:
    """The default class's name (None: no class is the default)."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None
    newest = max(str(meta(c).get("creationTimestamp") or "") for c in defaults)
    return min(str(meta(c).get("name", "")) for c in defaults if str(meta(c).get("creationTimestamp") or "") == newest)


def admit_claim(claim: PersistentVolumeClaim, classes: Iterable[StorageClass]) -> None:
    """Give a claim without a class the default one (mutates the claim)."""
    spec = claim.setdefault("spec", {})
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        return
    if ANN_BETA_STORAGE_CLASS in annotations_of(claim):
        return
    name = default_class(classes)
    if name is not None:
        spec["storageClassName"] = name
