"""Where the runtime learns which pods live on its node, and what follows from them.

Two sources, both optional: `PodSource` (the API server: pods bound to this node, as manifests; the
real one is `runtimekit.kube.nodeapi.KubeNodeApi`, tests pass a list) and `PodResourcesSource`
(kubelet's PodResources API: the pods kubelet knows and the device IDs of their containers; the
real one is `runtimekit.api.podresources_client.PodResourcesClient`). `EventSink` writes the
Events the runtime reports rebuilt allocations with (`KubeNodeApi` again).
- `allocations_from_pods` rebuilds allocations from the assignment annotations when the checkpoint
  is corrupt.
- `stale_allocations` decides which allocations to release: a pod is gone when every available
  source says so (absent, or finished; or being deleted while kubelet no longer runs it), and only
  after a grace period, so a pod admitted a moment ago is never released by a list taken before it;
  except that an allocation that existed before the lists were asked for (`settled`) is judged by
  them at once, which is what an Allocate that would over-commit does (kubelet frees a terminated
  pod's devices at admission as well). The allocations of prepared ResourceClaims (resource
  `kubelet_dra.CLAIM_RESOURCE`, made by the DRA plugin) are never stale here: kubelet releases them
  through NodeUnprepareResources.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from runtimekit.api.kubelet_dra import CLAIM_RESOURCE
from runtimekit.api.podresources_client import ListedPod
from runtimekit.kube.objects import Pod, meta
from runtimekit.model import Assignment, AssignmentError
from runtimekit.protocol import KitProtocol
from runtimekit.runtime.allocations import Allocation, Grant, PodRef

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


class PodSource(Protocol):
    """The pods bound to a node, as the API server returns them."""

    def list_node_pods(self, node: str) -> Sequence[Pod]:
        """Every pod whose spec.nodeName is `node`. Raises on any failure (never a partial list)."""
        ...


class PodResourcesSource(Protocol):
    """The pods kubelet knows on this node, with their containers' device IDs."""

    def list(self) -> Sequence[ListedPod]:
        """kubelet's PodResources List. Raises on failure."""
        ...


class EventSink(Protocol):
    """Where the runtime reports what it did to a pod's allocations."""

    def record_pod_event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        """Write an Event about the pod (best effort: never raises)."""
        ...


@dataclass(frozen=True)
class StaticPods:
    """A PodSource over a fixed list (tests, and the embedded cluster before it has an API server)."""

    pods: Sequence[Pod]

    def list_node_pods(self, node: str) -> list[Pod]:
        return [p for p in self.pods if (p.get("spec") or {}).get("nodeName") == node]


def pod_ref(pod: Pod) -> PodRef:
    m = meta(pod)
    return PodRef(str(m.get("namespace", "default")), str(m.get("name", "")), str(m.get("uid", "")))


def is_finished(pod: Pod) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in FINISHED_PHASES


def allocations_from_pods(
    pods: Iterable[Pod], node: str, protocol: KitProtocol, now_ms: int
) -> tuple[list[Allocation], list[str]]:
    """Allocations of the live pods of `node` that carry an assignment for it, and what was skipped why."""
    found: list[Allocation] = []
    skipped: list[str] = []
    key = protocol.annotations.assignment
    for pod in pods:
        ref = pod_ref(pod)
        annotations = meta(pod).get("annotations") or {}
        text = annotations.get(key) if isinstance(annotations, Mapping) else None
        if text is None or is_finished(pod) or (pod.get("spec") or {}).get("nodeName") != node:
            continue
        try:
            assignment = Assignment.from_annotation(str(text))
        except AssignmentError as exc:
            skipped.append(f"pod {ref}: {exc}")
            continue
        if assignment.node != node:
            skipped.append(f"pod {ref}: assigned to node {assignment.node}, not {node}")
            continue
        for container, shares in assignment.containers.items():
            grants = tuple(
                Grant(s.uuid, s.index, s.core_milli, s.memory_mib, s.parent_uuid or "", s.mig_profile, s.mig_start)
                for s in shares
            )
            if grants:
                found.append(Allocation(ref, container, grants, now_ms, resource_names=("recovered-from-pods",)))
    return found, skipped


def stale_allocations(
    allocations: Iterable[Allocation],
    api_pods: Sequence[Pod] | None,
    kubelet_pods: set[tuple[str, str]] | None,
    now_ms: int,
    grace_ms: int,
    settled: Collection[tuple[str, str]] | None = None,
) -> list[tuple[Allocation, str]]:
    """The allocations whose pod is gone, with why. None for a source means it could not be asked.
    `settled`: the (pod uid, container) of the allocations that existed before the lists were asked for;
    those are not protected by the grace period."""
    if api_pods is None and kubelet_pods is None:
        return []
    live_uids = {pod_ref(p).uid: p for p in api_pods} if api_pods is not None else None
    api_names = {(pod_ref(p).namespace, pod_ref(p).name) for p in api_pods} if api_pods is not None else set()
    stale = []
    for allocation in allocations:
        if CLAIM_RESOURCE in allocation.resource_names:
            continue  # a prepared ResourceClaim, not a pod: kubelet releases it through the DRA plugin
        pod = allocation.pod
        ended = _ended(pod, live_uids, kubelet_pods)
        if ended:  # the pod's own manifest says so: however young the allocation, it is over
            stale.append((allocation, ended))
            continue
        older_than_lists = settled is not None and allocation.key in settled
        if now_ms - allocation.created_unix_ms < grace_ms and not older_than_lists:
            continue  # absence from a list may only mean the list is older than the allocation
        if live_uids is not None and pod.uid not in live_uids and (pod.namespace, pod.name) in api_names:
            stale.append((allocation, "replaced by a new pod of the same name"))
            continue
        reason = _gone(pod, live_uids, kubelet_pods)
        if reason:
            stale.append((allocation, reason))
    return stale


def _ended(pod: PodRef, live_uids: Mapping[str, Pod] | None, kubelet_pods: set[tuple[str, str]] | None) -> str:
    """Why the pod has ended by its own manifest (finished, or being deleted with its containers
    stopped), or "": evidence that does not depend on how fresh the lists are."""
    manifest = live_uids.get(pod.uid) if live_uids is not None else None
    if manifest is None:
        return ""
    if is_finished(manifest):
        return f"pod is {manifest['status']['phase']}"
    stopped = kubelet_pods is not None and (pod.namespace, pod.name) not in kubelet_pods
    if meta(manifest).get("deletionTimestamp") and stopped:
        return "being deleted, and kubelet no longer runs it"  # its containers have stopped: free it now
    return ""


def _gone(pod: PodRef, live_uids: Mapping[str, Pod] | None, kubelet_pods: set[tuple[str, str]] | None) -> str:
    """Why the pod counts as gone (absent from the sources asked), or "" while any shows it."""
    reasons = []
    if live_uids is not None:
        if pod.uid in live_uids:
            return ""
        reasons.append("not on this node in the API server")
    if kubelet_pods is not None:
        if (pod.namespace, pod.name) in kubelet_pods:
            return ""
        reasons.append("not listed by kubelet's PodResources")
    return "; ".join(reasons)
