"""kube-scheduler's NodeVolumeLimits plugin (its CSI limits, `csi.go`) as pure functions.

A node's CSINode says how many volumes each CSI driver may attach there
(`spec.drivers[].allocatable.count`; a driver without a count, or a node without a CSINode, is not
limited). A pod fits when, for each driver, the unique volumes the node's pods already use plus the
pod's new ones stay within the count (`MAX_COUNT` otherwise, Unschedulable: an eviction can help).

A volume is named `<driver>/<handle>`, so one volume used by several pods counts once: a bound
claim's CSI volume by its driver and handle; an in-tree volume (AWS EBS, GCE PD, Azure Disk,
Cinder, bound or inline) by the CSI driver it migrates to, when the node has a CSINode; a claim not
bound yet (or bound to a volume not found) by its class's provisioner and a handle made of its
name. A claim without a class or of an unknown class is not counted. A new pod's claim that is
missing makes the node unfit (unresolvable); an existing pod's is not counted.

Pure; callers: the predicates plugin and the tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from runtimekit.kube.objects import CSINode, PersistentVolume, PersistentVolumeClaim, labels_of, meta
from runtimekit.kube.semantics.volumes import claim_class, ephemeral_owner_problem
from runtimekit.scheduler.kubesem.volumebinding import not_found
from runtimekit.scheduler.kubesem.volumes import (
    MIGRATED,
    PodVolumes,
    VolumeLookup,
    ebs_volume_id,
    gce_pd_handle,
)
from runtimekit.scheduler.kubesem.volumezone import BETA_ZONE, ZONE

MAX_COUNT = "node(s) exceed max volume count"
UNBOUND_PREFIX = "runtimekit-unbound"  # the handle of a volume not provisioned yet (kube's random prefix)
_BY_PLUGIN = {plugin: (source, driver) for source, (plugin, driver) in MIGRATED.items()}


class LimitsError(Exception):
    """A new pod's volumes cannot be counted; `unresolvable` when a claim is missing (kube's
    UnschedulableAndUnresolvable), else an error status."""

    def __init__(self, message: str, unresolvable: bool) -> None:
        super().__init__(message)
        self.message, self.unresolvable = message, unresolvable


def driver_limits(csinode: CSINode | None) -> dict[str, int]:
    """Per CSI driver of the node, how many volumes it may attach."""
    out: dict[str, int] = {}
    for driver in ((csinode or {}).get("spec") or {}).get("drivers") or []:
        count = (driver.get("allocatable") or {}).get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            out[str(driver.get("name", ""))] = count
    return out


def migration_on(csinode: CSINode | None, plugin: str) -> bool:
    """Whether an in-tree plugin's volumes count as its CSI driver's on the node (kube 1.28+: the
    GA migrations, once the node has a CSINode)."""
    return csinode is not None and plugin in _BY_PLUGIN


def _translated(volume: PersistentVolume) -> tuple[str, str] | None:
    """(in-tree plugin, CSI handle) of an in-tree volume that migrates to CSI; None for others."""
    spec = volume.get("spec") or {}
    for source, (plugin, _) in MIGRATED.items():
        found = spec.get(source)
        if isinstance(found, dict):
            if source == "awsElasticBlockStore":
                return plugin, ebs_volume_id(str(found.get("volumeID") or ""))
            if source == "gcePersistentDisk":
                zone = labels_of(volume).get(ZONE) or labels_of(volume).get(BETA_ZONE) or ""
                return plugin, gce_pd_handle(str(found.get("pdName") or ""), "" if "__" in zone else zone)
            if source == "azureDisk":
                return plugin, str(found.get("diskURI") or "")
            return plugin, str(found.get("volumeID") or "")
    return None


def _from_class(claim: PersistentVolumeClaim, csinode: CSINode | None, lookup: VolumeLookup) -> tuple[str, str]:
    name = claim_class(claim)
    found = lookup.storage_class(name) if name else None
    if found is None:
        return "", ""
    handle = f"{UNBOUND_PREFIX}-{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"
    provisioner = str(found.get("provisioner") or "")
    if provisioner in _BY_PLUGIN:
        return (_BY_PLUGIN[provisioner][1], handle) if migration_on(csinode, provisioner) else ("", "")
    return provisioner, handle


def _driver_info(claim: PersistentVolumeClaim, csinode: CSINode | None, lookup: VolumeLookup) -> tuple[str, str]:
    """(driver, handle) of the volume a claim uses ("" when it does not count)."""
    volume_name = str((claim.get("spec") or {}).get("volumeName") or "")
    volume = lookup.volume(volume_name) if volume_name else None
    if volume is None:
        return _from_class(claim, csinode, lookup)
    csi = (volume.get("spec") or {}).get("csi")
    if csi:
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
    translated = _translated(volume)
    if translated is None or not migration_on(csinode, translated[0]):
        return "", ""
    return _BY_PLUGIN[translated[0]][1], translated[1]


def attachable(
    namespace: str, volumes: PodVolumes, csinode: CSINode | None, lookup: VolumeLookup, new: bool
) -> dict[str, str]:
    """The volumes of a pod in `namespace` that count against a driver's limit: unique name ->
    driver. Raises LimitsError for a new pod whose claims cannot be read (see the module docstring)."""
    out: dict[str, str] = {}
    for use in volumes.claims:
        if not use.name:
            if new:
                raise LimitsError("PersistentVolumeClaim had no name", False)
            continue
        claim = lookup.claim(namespace, use.name)
        if claim is None:
            if new:
                message = f"looking up PVC {namespace}/{use.name}: {not_found('persistentvolumeclaim', use.name)}"
                raise LimitsError(message, True)
            continue
        if use.ephemeral:
            problem = ephemeral_owner_problem(namespace, volumes.pod, volumes.uid, claim)
            if problem:
                if new:
                    raise LimitsError(problem, False)
                continue
        driver, handle = _driver_info(claim, csinode, lookup)
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    for volume in volumes.inline:
        plugin, driver = MIGRATED[volume.source]
        if migration_on(csinode, plugin):
            out[f"{driver}/{volume.handle}"] = driver
    return out


def exceeds(new: Mapping[str, str], attached: Iterable[Mapping[str, str]], limits: Mapping[str, int]) -> bool:
    """Whether the new volumes (not used on the node yet) push a driver past its limit."""
    held: dict[str, str] = {}
    for volumes in attached:
        held.update(volumes)
    fresh = Counter(driver for name, driver in new.items() if name not in held)
    used = Counter(held.values())
    return any(driver in limits and used[driver] + count > limits[driver] for driver, count in fresh.items())
