"""kube-scheduler's VolumeZone plugin as pure functions (`volume_zone.go`).

PreFilter (`pv_topologies`): the topology labels of the volumes the pod's bound claims use
(`topology.kubernetes.io/zone` and `region`, and the deprecated `failure-domain.beta.kubernetes.io/`
ones; a value may list several zones joined by `__`, and a value that does not parse is left out).
An unbound claim of a WaitForFirstConsumer class is skipped; a claim with no name, an unbound claim
without a class or of a class that binds at once, a missing claim, class or volume makes the pod
unschedulable everywhere, in kube's words. Filter (`zone_fits`): a node carrying none of the four
labels fits (a single-zone cluster); else each volume label must be on the node (a beta label may be
matched by the node's GA label, not the other way round) with one of the volume's values.

Pure; callers: the predicates plugin and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimekit.kube.objects import PersistentVolume, labels_of, meta
from runtimekit.kube.semantics.volumes import WAIT_FOR_FIRST_CONSUMER, claim_class
from runtimekit.scheduler.kubesem.volumebinding import ClaimsProblem, not_found
from runtimekit.scheduler.kubesem.volumes import PodVolumes, VolumeLookup

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}


@dataclass(frozen=True)
class PvTopology:
    volume: str
    key: str
    values: frozenset[str]


def label_zones(value: str) -> frozenset[str] | None:
    """`LabelZonesToSet`: zones joined by `__`, trimmed; None when one of them is empty."""
    zones = [part.strip() for part in value.split("__")]
    return None if any(not zone for zone in zones) else frozenset(zones)


def volume_topologies(volume: PersistentVolume) -> list[PvTopology]:
    name, labels = str(meta(volume).get("name", "")), labels_of(volume)
    out: list[PvTopology] = []
    for key in TOPOLOGY_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        zones = label_zones(str(value))
        if zones is not None:
            out.append(PvTopology(name, key, zones))
    return out


def pv_topologies(namespace: str, volumes: PodVolumes, lookup: VolumeLookup) -> list[PvTopology] | ClaimsProblem:
    """PreFilter for a pod in `namespace` (see the module docstring); an empty list means the plugin
    skips the pod."""
    out: list[PvTopology] = []
    for name in volumes.persistent_claims:
        if not name:
            return ClaimsProblem("PersistentVolumeClaim had no name")
        claim = lookup.claim(namespace, name)
        if claim is None:
            return ClaimsProblem(not_found("persistentvolumeclaim", name))
        volume_name = str((claim.get("spec") or {}).get("volumeName") or "")
        if not volume_name:
            class_name = claim_class(claim)
            if not class_name:
                return ClaimsProblem("PersistentVolumeClaim had no pv name and storageClass name")
            found = lookup.storage_class(class_name)
            if found is None:
                return ClaimsProblem(not_found("storageclass.storage.k8s.io", class_name))
            mode = found.get("volumeBindingMode")
            if not mode:
                return ClaimsProblem(f'VolumeBindingMode not set for StorageClass "{class_name}"')
            if mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return ClaimsProblem("PersistentVolume had no name")
        volume = lookup.volume(volume_name)
        if volume is None:
            return ClaimsProblem(not_found("persistentvolume", volume_name))
        out.extend(volume_topologies(volume))
    return out


def zone_fits(topologies: Sequence[PvTopology], node_labels: Mapping[str, str]) -> bool:
    """Filter for one node (see the module docstring)."""
    if not any(key in node_labels for key in TOPOLOGY_LABELS):
        return True
    for topology in topologies:
        value = node_labels.get(topology.key)
        if value is None:
            value = node_labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return False
    return True
