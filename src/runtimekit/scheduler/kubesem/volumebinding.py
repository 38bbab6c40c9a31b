"""kube-scheduler's VolumeBinding plugin as pure functions (`volume_binding.go`, `binder.go`).

- `pod_claims` (PreFilter): the pod's claims split into bound ones and unbound ones whose class
  waits for the first consumer; a claim that is missing, lost, being deleted, an ephemeral claim
  the pod does not own, or an unbound claim that binds at once (the PV controller's to bind: the
  pod waits) makes the pod unschedulable everywhere, with kube's words (`ClaimsProblem`).
- `find_pod_volumes` (Filter, per node): a bound claim's volume must admit the node (else
  `NODE_CONFLICT`; a missing volume `PV_NOT_EXIST`); each unbound claim, smallest request first,
  takes the smallest available volume that matches it on that node, else is provisioned when its
  class names a provisioner whose allowed topologies admit the node (else `BIND_CONFLICT`); a
  claim already given a node by the scheduler (`volume.kubernetes.io/selected-node`) fits that
  node only. The answer is the node's `VolumePlan` (static bindings, claims to provision) or its
  reasons.
- `check_bindings` (PreBind's wait): whether the API objects show every planned binding done by the
  PV controller and provisioner, or why binding failed (kube's `checkBindings`).

Storage capacity tracking (CSIStorageCapacity) and in-tree to CSI translation of bound volumes'
node affinity are not modelled: a provisioner is taken to have room on every node it may use.
Pure; callers: the predicates plugin (filter, reserve, pre-bind) and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from runtimekit.kube.objects import PersistentVolume, PersistentVolumeClaim, annotations_of, meta
from runtimekit.kube.semantics.labels import SelectorError
from runtimekit.kube.semantics.volumes import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    ClassError,
    available_for,
    claim_class,
    claim_selector,
    ephemeral_owner_problem,
    fits_claim,
    is_claim_fully_bound,
    is_delay_binding,
    is_volume_bound_to_claim,
    node_affinity_matches,
    requested_storage,
    topology_matches,
    volume_capacity,
)
from runtimekit.scheduler.kubesem.volumes import PodVolumes, VolumeLookup, resource_version

NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(frozen=True)
class PodClaims:
    """A pod's claims after PreFilter: bound ones, and unbound ones waiting for their first consumer."""

    bound: tuple[PersistentVolumeClaim, ...] = ()
    delayed: tuple[PersistentVolumeClaim, ...] = ()

    @property
    def all_bound(self) -> bool:
        return not self.delayed


@dataclass(frozen=True)
class ClaimsProblem:
    """Why no node can take the pod for its claims (UnschedulableAndUnresolvable in kube; `error`
    marks what kube returns as an error status)."""

    message: str
    error: bool = False


@dataclass(frozen=True)
class StaticBinding:
    claim: PersistentVolumeClaim
    volume: PersistentVolume


@dataclass(frozen=True)
class VolumePlan:
    """What the pod's unbound claims take on one node: volumes to bind them to, claims to provision."""

    bindings: tuple[StaticBinding, ...] = ()
    provisions: tuple[PersistentVolumeClaim, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.bindings and not self.provisions


@dataclass(frozen=True)
class NodeResult:
    """The Filter's answer for one node: reasons in kube's order (none: the node fits), or an error."""

    plan: VolumePlan = field(default_factory=VolumePlan)
    reasons: tuple[str, ...] = ()
    error: str = ""


def not_found(resource: str, name: str) -> str:
    """A lister's NotFound message (`persistentvolumeclaim "x" not found`)."""
    return f'{resource} "{name}" not found'


def pod_claims(namespace: str, volumes: PodVolumes, lookup: VolumeLookup) -> PodClaims | ClaimsProblem:
    """PreFilter: the claims of the pod in `namespace`, or why it cannot be scheduled anywhere (see
    the module docstring)."""
    found: list[PersistentVolumeClaim] = []
    for use in volumes.claims:
        claim = lookup.claim(namespace, use.name)
        if claim is None:
            if use.ephemeral:
                return ClaimsProblem(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{use.name}"'
                )
            return ClaimsProblem(not_found("persistentvolumeclaim", use.name))
        if (claim.get("status") or {}).get("phase") == "Lost":
            volume = (claim.get("spec") or {}).get("volumeName", "")
            return ClaimsProblem(
                f'persistentvolumeclaim "{use.name}" bound to non-existent persistentvolume "{volume}"'
            )
        if meta(claim).get("deletionTimestamp"):
            return ClaimsProblem(f'persistentvolumeclaim "{use.name}" is being deleted')
        if use.ephemeral:
            problem = ephemeral_owner_problem(namespace, volumes.pod, volumes.uid, claim)
            if problem:
                return ClaimsProblem(problem)
        found.append(claim)
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate = False
    for claim in found:
        if is_claim_fully_bound(claim):
            bound.append(claim)
            continue
        try:
            delay = is_delay_binding(claim, lookup.storage_class)
        except ClassError as exc:
            return ClaimsProblem(str(exc), error=True)
        if delay and not (claim.get("spec") or {}).get("volumeName"):
            delayed.append(claim)
        else:  # an immediate claim, or one pre-bound to a volume: the PV controller binds it
            immediate = True
    if immediate:
        return ClaimsProblem(UNBOUND_IMMEDIATE)
    return PodClaims(tuple(bound), tuple(delayed))


def _check_bound(
    claims: Sequence[PersistentVolumeClaim], node: str, labels: Mapping[str, str], lookup: VolumeLookup
) -> str:
    """The reason a bound claim's volume rules the node out ("" when none)."""
    for claim in claims:
        volume = lookup.volume(str((claim.get("spec") or {}).get("volumeName") or ""))
        if volume is None:
            return PV_NOT_EXIST
        if not node_affinity_matches(volume, labels, node):
            return NODE_CONFLICT
    return ""


def _by_size(claims: Sequence[PersistentVolumeClaim]) -> list[PersistentVolumeClaim]:
    return sorted(claims, key=requested_storage)


def _provisions(
    claims: Sequence[PersistentVolumeClaim], labels: Mapping[str, str], lookup: VolumeLookup
) -> tuple[bool, tuple[PersistentVolumeClaim, ...]] | str:
    """checkVolumeProvisions: (every claim can be provisioned on the node, the claims) or an error."""
    out: list[PersistentVolumeClaim] = []
    for claim in claims:
        name = claim_class(claim)
        key = f"{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"
        if not name:
            return f"no class for claim {key!r}"
        found = lookup.storage_class(name)
        if found is None:
            return f"failed to find storage class {name!r}"
        provisioner = found.get("provisioner") or ""
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, ()
        if not topology_matches(found.get("allowedTopologies"), labels):
            return False, ()
        out.append(claim)
    return True, tuple(out)


def find_pod_volumes(
    claims: PodClaims, node: str, labels: Mapping[str, str], lookup: VolumeLookup, candidates: Candidates | None = None
) -> NodeResult:
    """Filter for one node (see the module docstring); `candidates` caches the volumes each unbound
    claim may take apart from the node (worked out once per pod)."""
    reasons: list[str] = []
    bound_reason = _check_bound(claims.bound, node, labels, lookup) if claims.bound else ""
    bindings: list[StaticBinding] = []
    provisions: tuple[PersistentVolumeClaim, ...] = ()
    unbound_ok = True
    if claims.delayed:
        to_provision: list[PersistentVolumeClaim] = []
        to_match: list[PersistentVolumeClaim] = []
        for claim in claims.delayed:
            selected = annotations_of(claim).get(ANN_SELECTED_NODE)
            if selected is None:
                to_match.append(claim)
            elif selected != node:
                unbound_ok = False  # kube's fast path: given to another node
                break
            else:
                to_provision.append(claim)
        if unbound_ok:
            chosen: dict[str, PersistentVolume] = {}
            for claim in _by_size(to_match):
                try:
                    match = (candidates or Candidates(lookup)).match(claim, node, labels, chosen)
                except SelectorError as exc:
                    return NodeResult(error=f"error creating internal label selector for claim: {exc}")
                if match is None:
                    unbound_ok = False
                    to_provision.append(claim)
                    continue
                chosen[str(meta(match).get("name", ""))] = match
                bindings.append(StaticBinding(claim, match))
            if to_provision:
                answer = _provisions(to_provision, labels, lookup)
                if isinstance(answer, str):
                    return NodeResult(error=answer)
                unbound_ok, provisions = answer
    if bound_reason == NODE_CONFLICT:
        reasons.append(NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(BIND_CONFLICT)
    if bound_reason == PV_NOT_EXIST:
        reasons.append(PV_NOT_EXIST)
    return NodeResult(VolumePlan(tuple(bindings), provisions), tuple(reasons))


class Candidates:
    """Per pod: for each unbound claim, the volume pre-bound to it and the volumes that match it on
    every criterion but the node (smallest first, the first of equal size before the others),
    worked out once; `match` then answers for a node as `find_matching_volume` would, checking
    node affinity only."""

    def __init__(self, lookup: VolumeLookup) -> None:
        self.lookup = lookup
        self._found: dict[str, tuple[PersistentVolume | None, list[PersistentVolume]]] = {}

    def _of(self, claim: PersistentVolumeClaim) -> tuple[PersistentVolume | None, list[PersistentVolume]]:
        key = f"{meta(claim).get('namespace', '')}/{meta(claim).get('name', '')}"
        found = self._found.get(key)
        if found is not None:
            return found
        selector = claim_selector(claim)
        prebound: PersistentVolume | None = None
        others: list[tuple[Fraction, int, PersistentVolume]] = []
        for i, volume in enumerate(self.lookup.volumes_of_class(claim_class(claim))):
            mine = is_volume_bound_to_claim(volume, claim)
            if (volume.get("spec") or {}).get("claimRef") and not mine:
                continue
            if not fits_claim(claim, volume):
                continue
            if mine:
                prebound = volume
                break
            if available_for(claim, volume, selector, True):
                others.append((volume_capacity(volume), i, volume))
        others.sort(key=lambda entry: (entry[0], entry[1]))
        self._found[key] = found = (prebound, [volume for _, _, volume in others])
        return found

    def match(
        self, claim: PersistentVolumeClaim, node: str, labels: Mapping[str, str], chosen: Mapping[str, object]
    ) -> PersistentVolume | None:
        prebound, others = self._of(claim)
        if prebound is not None and str(meta(prebound).get("name", "")) not in chosen:
            return prebound if node_affinity_matches(prebound, labels, node) else None
        for volume in others:
            if str(meta(volume).get("name", "")) not in chosen and node_affinity_matches(volume, labels, node):
                return volume
        return None


def check_bindings(
    node: str,
    labels: Mapping[str, str],
    bindings: Sequence[StaticBinding],
    provisions: Sequence[PersistentVolumeClaim],
    lookup: VolumeLookup,
) -> bool | str:
    """PreBind's wait (kube's `checkBindings`), on the API objects as the informers show them: True
    once every claim is fully bound by the PV controller (to a volume that admits the node); False
    while they are not yet (or the informers have not caught up with what was written); else why
    binding failed (the PV controller dropped a binding, a provisioner gave up the node, a claim
    is gone)."""
    for binding in bindings:
        name = str(meta(binding.volume).get("name", ""))
        volume = lookup.volume(name)
        claim_meta = meta(binding.claim)
        claim = lookup.claim(str(claim_meta.get("namespace", "")), str(claim_meta.get("name", "")))
        if volume is None:
            return f"failed to check binding: {not_found('persistentvolume', name)}"
        if claim is None:
            return f"failed to check binding: {not_found('persistentvolumeclaim', str(claim_meta.get('name', '')))}"
        if resource_version(binding.volume) > resource_version(volume):
            return False
        if not node_affinity_matches(volume, labels, node):
            return f"pv {name!r} node affinity doesn't match node {node!r}: no matching NodeSelectorTerms"
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            return f"ClaimRef got reset for pv {name!r}"
        if not is_claim_fully_bound(claim):
            return False
    for provision in provisions:
        provision_meta = meta(provision)
        claim_name = str(provision_meta.get("name", ""))
        claim = lookup.claim(str(provision_meta.get("namespace", "")), claim_name)
        if claim is None:
            return f"failed to check provisioning pvc: {not_found('persistentvolumeclaim', claim_name)}"
        if resource_version(provision) > resource_version(claim):
            return False
        annotations = meta(claim).get("annotations")
        if not annotations:
            return f"selectedNode annotation reset for PVC {claim_name!r}"
        if annotations.get(ANN_SELECTED_NODE) != node:
            return f"provisioning failed for PVC {claim_name!r}"
        volume_name = str((claim.get("spec") or {}).get("volumeName") or "")
        if volume_name:
            volume = lookup.volume(volume_name)
            if volume is None:
                return False  # the informer may not have shown it yet
            if not node_affinity_matches(volume, labels, node):
                return f"pv {volume_name!r} node affinity doesn't match node {node!r}: no matching NodeSelectorTerms"
        if not is_claim_fully_bound(claim):
            return False
    return True
