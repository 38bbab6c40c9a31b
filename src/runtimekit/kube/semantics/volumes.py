"""PersistentVolumes and their claims as Kubernetes reads them (component-helpers' `storage/volume`
and `storage/ephemeral`), written once for the scheduler's volume binding and the embedded cluster's
PV controller and provisioner:

- the annotations the PV controller, the scheduler and provisioners write (`ANN_*`);
- a claim's and a volume's class (`storageClassName`, else the beta annotation), requested size and
  capacity, volume mode (Filesystem unless set) and access modes;
- `find_matching_volume`: the smallest available volume that satisfies a claim (kube's
  `FindMatchingVolume`, used by both the controller and the scheduler): a volume pre-bound to the
  claim wins; otherwise it must be Available, of the claim's class, at least its size, of its
  volume mode, selected by its label selector, not being deleted, and (the scheduler's path, with a
  node) its node affinity must admit the node and its access modes cover the claim's;
- `bind_volume_to_claim`: the volume with its `claimRef` set to the claim (and `bound-by-controller`
  when it was not pre-bound by the user), as `GetBindVolumeToClaim`;
- binding modes (`WaitForFirstConsumer` classes delay binding), allowed topologies, the default
  class, generic ephemeral volumes' claim names and ownership.

Pure functions over the typed objects; no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from runtimekit.kube.objects import (
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
    annotations_of,
    labels_of,
    meta,
)
from runtimekit.kube.semantics.labels import Selector, label_selector
from runtimekit.kube.semantics.nodeaffinity import required_matches, selector_terms
from runtimekit.kube.semantics.quantity import parse_quantity

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BETA_DEFAULT_CLASS = "storageclass.beta.kubernetes.io/is-default-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODE_SHORT = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


class ClassError(ValueError):
    """A StorageClass that cannot be read as kube reads it (no `volumeBindingMode`)."""


def claim_class(claim: PersistentVolumeClaim) -> str:
    """The claim's class: the beta annotation when present, else `spec.storageClassName` ("" for none)."""
    annotated = annotations_of(claim).get(ANN_BETA_STORAGE_CLASS)
    if annotated is not None:
        return str(annotated)
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_class(volume: PersistentVolume) -> str:
    annotated = annotations_of(volume).get(ANN_BETA_STORAGE_CLASS)
    if annotated is not None:
        return str(annotated)
    return str((volume.get("spec") or {}).get("storageClassName") or "")


def _storage(resources: Mapping[str, object] | None) -> Fraction:
    amount = (resources or {}).get("storage")
    if amount is None:
        return Fraction(0)
    try:
        return parse_quantity(amount)
    except ValueError:
        return Fraction(0)


def requested_storage(claim: PersistentVolumeClaim) -> Fraction:
    """Bytes the claim asks for (`resources.requests.storage`; 0 when none)."""
    return _storage(((claim.get("spec") or {}).get("resources") or {}).get("requests"))


def volume_capacity(volume: PersistentVolume) -> Fraction:
    return _storage((volume.get("spec") or {}).get("capacity"))


def volume_mode_mismatch(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """Whether the claim's and the volume's modes differ (an unset mode is Filesystem)."""
    wanted = (claim.get("spec") or {}).get("volumeMode") or FILESYSTEM
    return wanted != ((volume.get("spec") or {}).get("volumeMode") or FILESYSTEM)


def access_modes_satisfied(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """Every access mode the claim asks for is one the volume offers."""
    offered = set((volume.get("spec") or {}).get("accessModes") or ())
    return all(mode in offered for mode in (claim.get("spec") or {}).get("accessModes") or ())


def claim_ref_of(claim: PersistentVolumeClaim) -> ObjectReference:
    """The reference a volume bound to `claim` carries (`reference.GetReference`)."""
    claim_meta = meta(claim)
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": str(claim_meta.get("namespace", "")),
        "name": str(claim_meta.get("name", "")),
        "uid": str(claim_meta.get("uid", "")),
        "resourceVersion": str(claim_meta.get("resourceVersion", "")),
    }


def is_volume_bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """The volume is pre-bound or bound to this claim: same name and namespace, and same UID when
    the volume's reference carries one."""
    ref = (volume.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    claim_meta = meta(claim)
    if ref.get("name") != claim_meta.get("name") or ref.get("namespace", "") != claim_meta.get("namespace", ""):
        return False
    return not ref.get("uid") or ref.get("uid") == claim_meta.get("uid")


def bind_volume_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """A copy of the volume bound to the claim, and whether anything changed: `claimRef` when it
    does not name the claim (with its UID), `bound-by-controller` when the user had not pre-bound it."""
    by_controller = not is_volume_bound_to_claim(volume, claim)
    bound = copy.deepcopy(volume)
    dirty = False
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    claim_meta = meta(claim)
    if (
        not ref
        or ref.get("name") != claim_meta.get("name")
        or ref.get("namespace", "") != claim_meta.get("namespace", "")
        or ref.get("uid", "") != claim_meta.get("uid", "")
    ):
        bound.setdefault("spec", {})["claimRef"] = claim_ref_of(claim)
        dirty = True
    annotations = bound.setdefault("metadata", {}).setdefault("annotations", {})
    if by_controller and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    return bound, dirty


def node_affinity_matches(volume: PersistentVolume, labels: Mapping[str, str], node_name: str = "") -> bool:
    """The volume's required node affinity admits a node with these labels (`CheckNodeAffinity`;
    a volume without one fits every node)."""
    affinity = (volume.get("spec") or {}).get("nodeAffinity")
    if not affinity or affinity.get("required") is None:
        return True
    return required_matches((), selector_terms(affinity.get("required")), labels, node_name)


def fits_claim(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """What every candidate volume must meet, pre-bound or not: at least the claim's size, its
    volume mode, and not being deleted."""
    if volume_capacity(volume) < requested_storage(claim) or volume_mode_mismatch(claim, volume):
        return False
    return not meta(volume).get("deletionTimestamp")


def claim_selector(claim: PersistentVolumeClaim) -> Selector | None:
    """The claim's label selector (None: it has none); raises SelectorError when it does not parse."""
    selector = (claim.get("spec") or {}).get("selector")
    return None if selector is None else label_selector(selector, "selector")


def available_for(
    claim: PersistentVolumeClaim, volume: PersistentVolume, selector: Selector | None, access_modes: bool
) -> bool:
    """What an unbound volume must meet besides `fits_claim` and node affinity: Available, selected
    by the claim's selector, of its class, and (on the scheduler's path) offering its access modes."""
    if (volume.get("status") or {}).get("phase") != "Available":
        return False
    if selector is not None and not selector.matches(labels_of(volume)):
        return False
    if volume_class(volume) != claim_class(claim):
        return False
    return not access_modes or access_modes_satisfied(claim, volume)


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: Iterable[PersistentVolume],
    node: tuple[str, Mapping[str, str]] | None = None,
    excluded: Mapping[str, object] | None = None,
    delay_binding: bool = False,
) -> PersistentVolume | None:
    """The volume to bind the claim to (`FindMatchingVolume`): one pre-bound to it (None when that
    one does not admit `node`), else the smallest that matches (the first of equal size). `node`
    (name, labels) is given on the scheduler's path only: node affinity and access modes are checked
    there. `delay_binding` (the controller's path for a WaitForFirstConsumer claim) returns pre-bound
    volumes only. Raises SelectorError when the claim's label selector does not parse."""
    selector = claim_selector(claim)
    best: PersistentVolume | None = None
    best_size = Fraction(0)
    for volume in volumes:
        if excluded and str(meta(volume).get("name", "")) in excluded:
            continue
        bound_here = is_volume_bound_to_claim(volume, claim)
        if (volume.get("spec") or {}).get("claimRef") and not bound_here:
            continue
        if not fits_claim(claim, volume):
            continue
        affinity_ok = node is None or node_affinity_matches(volume, node[1], node[0])
        if bound_here:
            return volume if affinity_ok else None
        if node is None and delay_binding:
            continue
        if not affinity_ok or not available_for(claim, volume, selector, node is not None):
            continue
        size = volume_capacity(volume)
        if best is None or size < best_size:
            best, best_size = volume, size
    return best


def binding_mode(storage_class: StorageClass) -> str:
    """The class's `volumeBindingMode`; raises ClassError when unset (kube-apiserver defaults it)."""
    mode = storage_class.get("volumeBindingMode")
    if not mode:
        raise ClassError(f"VolumeBindingMode not set for StorageClass {meta(storage_class).get('name', '')!r}")
    return str(mode)


def is_delay_binding(claim: PersistentVolumeClaim, class_of: Callable[[str], StorageClass | None]) -> bool:
    """Whether binding the claim waits for its first consumer (`IsDelayBindingMode`): a claim
    without a class, or of a class that does not exist, binds at once. Raises ClassError."""
    name = claim_class(claim)
    if not name:
        return False
    found = class_of(name)
    if found is None:
        return False
    return binding_mode(found) == WAIT_FOR_FIRST_CONSUMER


def is_claim_fully_bound(claim: PersistentVolumeClaim) -> bool:
    """Bound to a volume, and the PV controller has finished binding it (`bind-completed`)."""
    return bool((claim.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(claim)


def topology_matches(terms: Iterable[TopologySelectorTerm] | None, labels: Mapping[str, str]) -> bool:
    """A class's `allowedTopologies` admit a node with these labels: no terms admit every node; a
    term admits it when each of its label requirements has the node's value among its values."""
    listed = list(terms or ())
    if not listed:
        return True
    for term in listed:
        expressions = term.get("matchLabelExpressions") or []
        if all(labels.get(str(e.get("key", ""))) in (e.get("values") or ()) for e in expressions):
            return True
    return False


def is_default_class(storage_class: StorageClass) -> bool:
    annotations = annotations_of(storage_class)
    return annotations.get(ANN_DEFAULT_CLASS) == "true" or annotations.get(ANN_BETA_DEFAULT_CLASS) == "true"


def ephemeral_owner_problem(namespace: str, pod: str, pod_uid: str, claim: PersistentVolumeClaim) -> str:
    """Why the claim is not the ephemeral volume of pod `namespace/pod` ("" when the pod controls it)."""
    for ref in meta(claim).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("uid") == pod_uid:
            return ""
    claim_meta = meta(claim)
    return (
        f"PVC {claim_meta.get('namespace', '')}/{claim_meta.get('name', '')} was not created for pod "
        f"{namespace}/{pod} (pod is not owner)"
    )
