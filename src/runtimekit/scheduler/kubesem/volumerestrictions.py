"""kube-scheduler's VolumeRestrictions plugin as pure functions (`volume_restrictions.go`).

- Same-disk conflicts: a pod cannot go where a pod already uses the same GCE PD, iSCSI IQN or RBD
  image (sharing a monitor) unless both mount it read-only, nor the same AWS EBS volume at all
  (`Disk.conflicts`): `DISK_CONFLICT`.
- ReadWriteOncePod: a claim with that access mode may be used by one pod in the whole cluster; a
  pod whose such claim a scheduled pod uses fits no node: `RWOP_CONFLICT`. Both are Unschedulable
  (an eviction can resolve them), not unresolvable.
PreFilter (`rwop_claims`) reads the pod's `persistentVolumeClaim` claims (a missing one makes the
pod unschedulable everywhere); the plugin skips a pod with neither a restricted disk nor a claim
in use. Pure; callers: the predicates plugin and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtimekit.kube.semantics.volumes import READ_WRITE_ONCE_POD
from runtimekit.scheduler.kubesem.volumebinding import ClaimsProblem, not_found
from runtimekit.scheduler.kubesem.volumes import Disk, PodVolumes, VolumeLookup

DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"


def rwop_claims(namespace: str, volumes: PodVolumes, lookup: VolumeLookup) -> frozenset[str] | ClaimsProblem:
    """The keys (`namespace/name`) of the claims with the ReadWriteOncePod access mode of a pod in
    `namespace`."""
    out: set[str] = set()
    for name in volumes.persistent_claims:
        claim = lookup.claim(namespace, name)
        if claim is None:
            return ClaimsProblem(not_found("persistentvolumeclaim", name))
        if READ_WRITE_ONCE_POD in ((claim.get("spec") or {}).get("accessModes") or ()):
            out.add(f"{namespace}/{name}")
    return frozenset(out)


def claims_in_use(placed: Iterable[tuple[str, PodVolumes | None]]) -> set[str]:
    """The claims (`namespace/name`) the placed pods (namespace, volumes) use: kube's usedPVCSet."""
    out: set[str] = set()
    for namespace, volumes in placed:
        if volumes is not None:
            out.update(f"{namespace}/{claim.name}" for claim in volumes.claims)
    return out


def disks_conflict(disks: Iterable[Disk], existing: Iterable[Disk]) -> bool:
    """Whether one of the pod's disks conflicts with one a pod on the node uses."""
    held = list(existing)
    return any(disk.conflicts(other) for disk in disks for other in held)
