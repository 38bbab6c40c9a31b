"""Which ResourceClaims a pod and its containers use, as kubelet reads them.

A pod names its claims in `spec.resourceClaims` (a claim by `resourceClaimName`, or a template whose
claim `status.resourceClaimStatuses` names once the claim controller made it); a container uses the
ones its `resources.claims` name, all of a claim's requests or one (`request`). Pure; callers: the
simulated kubelet's DRA devices (`cluster.kubelet.dradevices`) and the runtime's usage attribution
of claim-prepared containers (`runtime.claimusers`); the scheduler asks `uses_claims` of every pod.
"""

from __future__ import annotations

from typing import TypeGuard

from runtimekit.kube.objects import Pod


def uses_claims(pod: Pod | None) -> TypeGuard[Pod]:
    """Whether the pod names any ResourceClaim (one dict lookup: schedulers ask it of every pod)."""
    return pod is not None and bool((pod.get("spec") or {}).get("resourceClaims"))


def pod_claims(pod: Pod) -> dict[str, str]:
    """The pod's claims: the name containers use -> the ResourceClaim's name ("" while not made yet)."""
    made = {
        s.get("name", ""): s.get("resourceClaimName", "")
        for s in pod.get("status", {}).get("resourceClaimStatuses", [])
    }
    return {
        c.get("name", ""): c.get("resourceClaimName") or made.get(c.get("name", ""), "")
        for c in pod.get("spec", {}).get("resourceClaims", [])
    }


def claim_users(pod: Pod) -> list[tuple[str, str, str]]:
    """(container, ResourceClaim name, request: "" for all of it) for every claim a container of the pod
    uses, in the order of the pod's containers; claims not made yet are left out."""
    named = pod_claims(pod)
    return [
        (str(container.get("name", "")), named[ref.get("name", "")], str(ref.get("request", "")))
        for container in pod.get("spec", {}).get("containers", [])
        for ref in container.get("resources", {}).get("claims", [])
        if named.get(ref.get("name", ""))
    ]
