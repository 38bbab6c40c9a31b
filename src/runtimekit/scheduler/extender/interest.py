"""Which pods the extender is for: those that ask for the kit's resources (kube-scheduler's
`HTTPExtender.IsInterested` with `managedResources`), and the list of those resources for
kube-scheduler's configuration. Callers: the extender's verbs (a pod without any passes through
untouched) and `schedconfig.py`.
"""

from __future__ import annotations

from runtimekit.kube.objects import Pod
from runtimekit.model.mig import MIG_GEOMETRY
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.loader import RESOURCE_KINDS
from runtimekit.protocol.presets import passed_resources


def asks_kit_resources(pod: Pod, protocol: KitProtocol) -> bool:
    """Whether a container or init container of the pod names one of the kit's resources (any of its
    names, MIG slices included) in its requests or limits, as kube-scheduler checks managed resources."""
    spec = pod.get("spec") or {}
    for container in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ())):
        resources = container.get("resources") or {}
        for amounts in (resources.get("requests"), resources.get("limits")):
            if amounts and any(protocol.manages(name) for name in amounts):
                return True
    return False


def managed_resources(protocol: KitProtocol) -> list[str]:
    """Every resource name of the kit, for the extender's `managedResources`: whole GPUs, shares
    (every alias), and one per MIG profile of the GPU models the kit knows (kube-scheduler matches
    names exactly, so the MIG prefix is spelt out per profile)."""
    names = [n for kind in RESOURCE_KINDS for n in protocol.names(kind)]
    profiles = sorted({p for geometry in MIG_GEOMETRY.values() for p in geometry.names})
    names += [f"{protocol.resources.mig_prefix}{p}" for p in profiles]
    names += sorted(passed_resources(protocol))  # HAMi's task priority: kube-scheduler must not count it either
    return list(dict.fromkeys(names))
