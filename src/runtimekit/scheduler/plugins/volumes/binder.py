"""kube-scheduler's VolumeBinding after the node is chosen (`AssumePodVolumes`,
`RevertAssumedPodVolumes`, `BindPodVolumes`), for the `predicates` plugin's Reserve, Unreserve and
PreBind:

- Reserve: the pod's unbound claims take, on its node, the volumes and provisioning the Filter
  found (worked out again for that node); each chosen volume is assumed bound to its claim
  (`claimRef`, `bound-by-controller`) and each claim to provision assumed to carry
  `volume.kubernetes.io/selected-node`, so the pods placed after it, in this session and the next
  ones, see them taken. A pod whose claims are all bound has nothing to reserve.
- Unreserve: the assumptions go (idempotent).
- PreBind: the volumes and claims are written to the API server (a PUT each, as kube does), then it
  waits, on the informers' view, until the PV controller (and the provisioner) have bound every
  claim, for at most `bind_timeout` seconds (kube's `bindTimeoutSeconds`, 600 by default). A refused
  write, a binding the PV controller undid, a provisioner that gave the node up, a pod deleted
  meanwhile or the timeout fail the bind: the binder unreserves the pod and tries it again later.

The plans between Reserve and PreBind are kept by pod key; a dict operation each, so the binder
threads and the scheduling thread need no lock beyond the GIL's.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass

from runtimekit.kube.objects import PersistentVolumeClaim
from runtimekit.kube.semantics.volumes import ANN_SELECTED_NODE, bind_volume_to_claim
from runtimekit.model import PodKey
from runtimekit.scheduler.framework.binding import Binding, VolumeAccess
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.status import SUCCESS, Status, error
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem import volumebinding as binding
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.plugins.volumes.assumed import AssumedVolumes, AssumeError, VolumeView, claim_key, volume_key

log = logging.getLogger(__name__)
DEFAULT_BIND_TIMEOUT_S = 600.0  # kube-scheduler's VolumeBindingArgs.bindTimeoutSeconds
CHECK_EVERY_S = 1.0  # PreBind looks again at least this often (kube polls every second)


@dataclass(frozen=True)
class Reserved:
    """A pod's volumes as Reserve assumed them on its node."""

    node: str
    bindings: tuple[binding.StaticBinding, ...]
    provisions: tuple[PersistentVolumeClaim, ...]


class VolumeBinder:
    """See the module docstring."""

    def __init__(self, assumed: AssumedVolumes, bind_timeout: float = DEFAULT_BIND_TIMEOUT_S) -> None:
        self.assumed, self.bind_timeout = assumed, bind_timeout
        self.plans: dict[PodKey, Reserved] = {}

    # -- Reserve / Unreserve -------------------------------------------------------------------
    def reserve(self, task: TaskInfo, facts: PodFacts, view: VolumeView, ssn: SessionView) -> Status:
        volumes = facts.volumes
        if volumes is None or not volumes.claims or task.node is None:
            return SUCCESS
        claims = binding.pod_claims(facts.namespace, volumes, view)
        if isinstance(claims, binding.ClaimsProblem):
            return error(claims.message)
        if claims.all_bound:
            return SUCCESS
        node = ssn.snapshot.meta[ssn.table.row(task.node)]
        if node is None:
            return error(f"node {task.node} is gone")
        found = binding.find_pod_volumes(claims, node.name, node.labels, view)
        if found.error or found.reasons:
            return error(found.error or "; ".join(found.reasons))
        try:
            reserved = self.assume(node.name, found.plan, view)
        except AssumeError as exc:
            return error(f"assuming volumes: {exc}")
        self.plans[task.key] = reserved
        return SUCCESS

    def assume(self, node: str, plan: binding.VolumePlan, view: VolumeView) -> Reserved:
        """kube's AssumePodVolumes: every assumption or none (raises AssumeError)."""
        bindings: list[binding.StaticBinding] = []
        provisions: list[PersistentVolumeClaim] = []
        try:
            for chosen in plan.bindings:
                volume, dirty = bind_volume_to_claim(chosen.volume, chosen.claim)
                if dirty:
                    self.assumed.assume_volume(view.catalog, volume)
                bindings.append(binding.StaticBinding(chosen.claim, volume))
            for claim in plan.provisions:
                selected = copy.deepcopy(claim)
                selected.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
                self.assumed.assume_claim(view.catalog, selected)
                provisions.append(selected)
        except AssumeError:
            self._revert(bindings, provisions)
            raise
        return Reserved(node, tuple(bindings), tuple(provisions))

    def _revert(self, bindings: list[binding.StaticBinding], provisions: list[PersistentVolumeClaim]) -> None:
        for chosen in bindings:
            self.assumed.restore_volume(volume_key(chosen.volume))
        for claim in provisions:
            self.assumed.restore_claim(claim_key(claim))

    def unreserve(self, task: TaskInfo) -> None:
        reserved = self.plans.pop(task.key, None)
        if reserved is not None:
            self._revert(list(reserved.bindings), list(reserved.provisions))

    # -- PreBind -------------------------------------------------------------------------------
    def pre_bind(self, bound: Binding) -> Status:
        reserved = self.plans.get(bound.task.key)
        if reserved is None:  # no claims, or all bound already
            return SUCCESS
        access = bound.volumes
        if access is None:
            return error("binding volumes: there is no API server to bind them through")
        written = self.write(access, reserved)
        if isinstance(written, str):
            return error(f"binding volumes: {written}")
        answer = self._wait(bound, reserved.node, *written)
        if answer is True:
            self.plans.pop(bound.task.key, None)
            return SUCCESS
        return error(f"binding volumes: {answer}")

    def write(
        self, access: VolumeAccess, reserved: Reserved
    ) -> tuple[list[binding.StaticBinding], list[PersistentVolumeClaim]] | str:
        """kube's bindAPIUpdate: each volume, then each claim to provision, written in turn (the API
        server's answers returned); at the first refusal, the assumptions not written yet are
        dropped and the refusal returned."""
        bindings, provisions = list(reserved.bindings), list(reserved.provisions)
        done = provisioned = 0
        try:
            for i, chosen in enumerate(bindings):
                bindings[i] = binding.StaticBinding(chosen.claim, access.update_volume(chosen.volume))
                done += 1
            for i, claim in enumerate(provisions):
                provisions[i] = access.update_claim(claim)
                provisioned += 1
        except Exception as exc:  # the API server refused (a conflict, the object gone, ...)
            self._revert(bindings[done:], provisions[provisioned:])
            return str(exc)
        return bindings, provisions

    def _wait(
        self,
        bound: Binding,
        node: str,
        bindings: list[binding.StaticBinding],
        provisions: list[PersistentVolumeClaim],
    ) -> bool | str:
        """Until the PV controller has bound every claim (True), binding failed (why), or time runs out."""
        access = bound.volumes
        assert access is not None
        deadline = time.monotonic() + self.bind_timeout
        while True:
            if not access.pod_exists(bound.task.key):
                return "pod does not exist any more"
            labels = access.node_labels(node)
            if labels is None:
                return f"failed to get node {node!r}"
            catalog = access.catalog()
            answer = binding.check_bindings(node, labels, bindings, provisions, catalog)
            if answer is not False:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                return "timed out waiting for the condition"
            if not access.wait(catalog.version, min(left, CHECK_EVERY_S)):
                return "the scheduler is stopping"
