"""What kube-scheduler's volume plugins read of a pod and of the cluster's storage objects.

- `PodVolumes` (parsed once per manifest, part of the pod's `PodFacts`): the claims the pod uses
  (`persistentVolumeClaim` volumes, and generic ephemeral volumes with their `<pod>-<volume>`
  claims), the in-tree disks VolumeRestrictions compares (GCE PD, AWS EBS, iSCSI, RBD) and the
  inline in-tree volumes NodeVolumeLimits counts once migrated to CSI. A pod with none of these
  has no `PodVolumes` (None), so nothing about volumes costs it anything.
- `VolumeCatalog`: an immutable view of the PersistentVolumeClaims, PersistentVolumes,
  StorageClasses and CSINodes a scheduler cache watches, handed to a session in its snapshot;
  `VolumeLookup` is what the volume semantics read (the catalog, or the catalog with the
  bindings the scheduler assumed laid over it).

Pure; callers: the pod parsing (`pods.py`), the volume semantics of this package, the scheduler
caches (which build catalogs) and the predicates plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, cast

from runtimekit.kube.objects import (
    CSINode,
    JsonObject,
    PersistentVolume,
    PersistentVolumeClaim,
    PodSpec,
    StorageClass,
    meta,
)
from runtimekit.kube.semantics.volumes import volume_class

GCE_PD, AWS_EBS, ISCSI, RBD = "gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd"
# in-tree plugins migrated to CSI: volume source field -> (in-tree plugin name, CSI driver)
MIGRATED: dict[str, tuple[str, str]] = {
    AWS_EBS: ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    GCE_PD: ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
}


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """A claim a pod's volume uses: `name` ("" when the volume names none), and whether it is a
    generic ephemeral volume's (whose claim the pod must own)."""

    name: str
    ephemeral: bool = False
    volume: str = ""


@dataclass(frozen=True, slots=True)
class Disk:
    """An in-tree disk VolumeRestrictions compares: its kind and identity (GCE PD name, EBS volume
    ID, iSCSI IQN, RBD pool and image), RBD's monitors, and whether it is mounted read-only."""

    kind: str
    ident: tuple[str, ...]
    read_only: bool = False
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: Disk) -> bool:
        """kube's `isVolumeConflict`: the same GCE PD, iSCSI IQN or RBD image (sharing a monitor)
        unless both mounts are read-only; the same EBS volume always."""
        if self.kind != other.kind or self.ident != other.ident:
            return False
        if self.kind == AWS_EBS:
            return True
        if self.kind == RBD and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True)
class InlineVolume:
    """An inline in-tree volume CSI migration counts: its source field and volume handle."""

    source: str
    handle: str


@dataclass(frozen=True)
class PodVolumes:
    """A pod's volumes as the volume plugins read them (see the module docstring)."""

    pod: str  # the pod's name (its ephemeral claims are `<pod>-<volume>`)
    uid: str  # the pod's UID (it must control its ephemeral claims)
    claims: tuple[ClaimUse, ...] = ()
    disks: tuple[Disk, ...] = ()
    inline: tuple[InlineVolume, ...] = ()

    @property
    def persistent_claims(self) -> tuple[str, ...]:
        """The names of its `persistentVolumeClaim` volumes (what VolumeZone and ReadWriteOncePod read)."""
        return tuple(c.name for c in self.claims if not c.ephemeral)


def _text(source: JsonObject, key: str) -> str:
    return str(source.get(key) or "")


def _disk(kind: str, source: JsonObject) -> Disk | None:
    read_only = bool(source.get("readOnly"))
    if kind == GCE_PD:
        return Disk(kind, (_text(source, "pdName"),), read_only)
    if kind == AWS_EBS:
        return Disk(kind, (_text(source, "volumeID"),), read_only)
    if kind == ISCSI:
        return Disk(kind, (_text(source, "iqn"),), read_only)
    if kind == RBD:
        monitors = frozenset(str(m) for m in source.get("monitors") or ())
        return Disk(kind, (_text(source, "pool") or "rbd", _text(source, "image")), read_only, monitors)
    return None


def _inline_handle(kind: str, source: JsonObject) -> str:
    if kind == AWS_EBS:
        return ebs_volume_id(_text(source, "volumeID"))
    if kind == GCE_PD:
        return gce_pd_handle(_text(source, "pdName"), "")
    if kind == "azureDisk":
        return _text(source, "diskURI")
    return _text(source, "volumeID")


def ebs_volume_id(text: str) -> str:
    """An EBS volume ID as the CSI driver names it: `aws://<zone>/<id>` becomes `<id>`."""
    return text.rsplit("/", 1)[-1] if text.startswith("aws://") else text


def gce_pd_handle(pd_name: str, zone: str) -> str:
    """The GCE PD CSI driver's handle of an in-tree disk (zone UNSPECIFIED when unknown)."""
    return f"projects/UNSPECIFIED/zones/{zone or 'UNSPECIFIED'}/disks/{pd_name}"


def pod_volumes(spec: PodSpec, pod: str, uid: str) -> PodVolumes | None:
    """The volumes of a pod spec the volume plugins read; None when it has none of them."""
    volumes = spec.get("volumes")
    if not volumes:
        return None
    claims: list[ClaimUse] = []
    disks: list[Disk] = []
    inline: list[InlineVolume] = []
    for volume in volumes:
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict):
            claims.append(ClaimUse(str(claim.get("claimName") or ""), volume=str(volume.get("name") or "")))
            continue
        if isinstance(volume.get("ephemeral"), dict):
            name = str(volume.get("name") or "")
            claims.append(ClaimUse(f"{pod}-{name}", True, name))
            continue
        for kind in (GCE_PD, AWS_EBS, ISCSI, RBD, "azureDisk", "cinder"):
            source = cast("JsonObject | None", volume.get(kind))
            if not isinstance(source, dict):
                continue
            disk = _disk(kind, source)
            if disk is not None:
                disks.append(disk)
            if kind in MIGRATED:
                inline.append(InlineVolume(kind, _inline_handle(kind, source)))
            break
    if not (claims or disks or inline):
        return None
    return PodVolumes(pod, uid, tuple(claims), tuple(disks), tuple(inline))


class VolumeLookup(Protocol):
    """The storage objects the volume semantics read, by key."""

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None: ...

    def volume(self, name: str) -> PersistentVolume | None: ...

    def storage_class(self, name: str) -> StorageClass | None: ...

    def csinode(self, node: str) -> CSINode | None: ...

    def volumes_of_class(self, name: str) -> list[PersistentVolume]: ...


@dataclass(frozen=True)
class VolumeCatalog:
    """The storage objects a cache watched, as one session sees them: claims by `namespace/name`,
    volumes, classes and CSINodes by name; `version` changes whenever any of them does."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    csinodes: Mapping[str, CSINode] = field(default_factory=dict)
    version: int = 0

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    def volume(self, name: str) -> PersistentVolume | None:
        return self.volumes.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.get(name)

    def csinode(self, node: str) -> CSINode | None:
        return self.csinodes.get(node)

    @cached_property
    def by_class(self) -> Mapping[str, tuple[str, ...]]:
        """Volume names per class, in the order the cache learned them (worked out when first asked)."""
        out: dict[str, list[str]] = {}
        for name, volume in self.volumes.items():
            out.setdefault(volume_class(volume), []).append(name)
        return {k: tuple(v) for k, v in out.items()}

    def volumes_of_class(self, name: str) -> list[PersistentVolume]:
        return [self.volumes[v] for v in self.by_class.get(name, ())]


EMPTY_CATALOG = VolumeCatalog()


def resource_version(obj: PersistentVolume | PersistentVolumeClaim | None) -> int:
    """An object's resourceVersion as a number (kube's assume cache compares them so); -1 when unset."""
    if obj is None:
        return -1
    text = str(meta(obj).get("resourceVersion") or "")
    return int(text) if text.isdigit() else -1
