"""kube-scheduler's volume filters as the `predicates` plugin runs them (Volcano runs
NodeVolumeLimits, VolumeZone and VolumeBinding inside its predicates plugin too), in kube-scheduler's
order: VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone.

`VolumeFilters.reasons(task, facts, rows, ssn)` answers, for a pod with volumes (`PodFacts.volumes`;
other pods never get here), the reason each row fails ("" when it passes): first the PreFilter
part of each filter, whose failure fails every row (a missing claim, an unbound claim of a class
that binds at once, ...), then per node. The semantics are `runtimekit.scheduler.kubesem`'s
(`volumebinding`, `volumezone`, `volumelimits`, `volumerestrictions`); the storage objects are the
session's catalog with the scheduler's assumed bindings laid over (`assumed.VolumeView`, made once
per session), and the pods already on nodes are the session's pod index, so placements and
evictions made in the session count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from runtimekit.scheduler.framework.info import NodeMeta, TaskInfo
from runtimekit.scheduler.framework.state import StateKey
from runtimekit.scheduler.framework.values import Rows
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem import volumebinding as binding
from runtimekit.scheduler.kubesem import volumelimits as limits
from runtimekit.scheduler.kubesem import volumerestrictions as restrictions
from runtimekit.scheduler.kubesem import volumezone as zone
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.volumes import Disk, PodVolumes
from runtimekit.scheduler.plugins.volumes.assumed import AssumedVolumes, VolumeView

# the reasons the filters give per node (prefilter problems carry their own words)
REASONS = (
    restrictions.DISK_CONFLICT,
    restrictions.RWOP_CONFLICT,
    limits.MAX_COUNT,
    binding.NODE_CONFLICT,
    binding.BIND_CONFLICT,
    binding.NOT_ENOUGH_SPACE,
    binding.PV_NOT_EXIST,
    zone.REASON,
)
# kube-scheduler's Unschedulable (an eviction may help); the others are UnschedulableAndUnresolvable
RESOLVABLE = frozenset({restrictions.DISK_CONFLICT, restrictions.RWOP_CONFLICT, limits.MAX_COUNT})


@dataclass(frozen=True)
class VolumeSwitches:
    """Which of the volume filters run (Volcano's `predicate.*Enable` keys, and the kit's own for
    VolumeRestrictions, which Volcano does not run)."""

    restrictions: bool = True
    limits: bool = True
    binding: bool = True
    zone: bool = True

    @property
    def any(self) -> bool:
        return self.restrictions or self.limits or self.binding or self.zone


_VIEW: StateKey[VolumeView] = StateKey("volumes/view")


class VolumeFilters:
    """See the module docstring."""

    def __init__(self, switches: VolumeSwitches, assumed: AssumedVolumes) -> None:
        self.switches, self.assumed = switches, assumed

    def view(self, ssn: SessionView) -> VolumeView:
        """The session's storage objects with the assumed bindings over them (made on first use)."""
        found = ssn.state.get(_VIEW)
        if found is None:
            catalog = ssn.snapshot.volumes
            if not self.assumed.empty:
                self.assumed.prune(catalog)
            found = VolumeView(catalog, self.assumed)
            ssn.state.write(_VIEW, found)
        return found

    def reasons(self, task: TaskInfo, facts: PodFacts, rows: Rows, ssn: SessionView, index: PodIndex) -> list[str]:
        """Per row, why the pod's volumes rule the node out ("" when they do not)."""
        volumes = facts.volumes
        assert volumes is not None
        view, namespace, switches = self.view(ssn), facts.namespace, self.switches
        metas = [ssn.snapshot.meta[int(row)] for row in rows]
        out = ["" for _ in metas]
        rwop: frozenset[str] = frozenset()
        if switches.restrictions and (volumes.disks or volumes.persistent_claims):
            found = restrictions.rwop_claims(namespace, volumes, view)
            if isinstance(found, binding.ClaimsProblem):
                return [found.message] * len(out)
            rwop = found
        claims: binding.PodClaims | None = None
        if switches.binding and volumes.claims:
            answer = binding.pod_claims(namespace, volumes, view)
            if isinstance(answer, binding.ClaimsProblem):
                return [answer.message] * len(out)
            claims = answer
        topologies: list[zone.PvTopology] = []
        if switches.zone and volumes.persistent_claims:
            pv_topologies = zone.pv_topologies(namespace, volumes, view)
            if isinstance(pv_topologies, binding.ClaimsProblem):
                return [pv_topologies.message] * len(out)
            topologies = pv_topologies
        if switches.restrictions:
            self._restrictions(volumes, rwop, rows, index, out)
        if switches.limits and (volumes.claims or volumes.inline):
            self._limits(namespace, volumes, rows, metas, index, view, out)
        if claims is not None and (claims.bound or claims.delayed):
            candidates = binding.Candidates(view)
            for i, node in self._open(metas, out):
                result = binding.find_pod_volumes(claims, node.name, node.labels, view, candidates)
                out[i] = result.error or (result.reasons[0] if result.reasons else "")
        if topologies:
            for i, node in self._open(metas, out):
                if not zone.zone_fits(topologies, node.labels):
                    out[i] = zone.REASON
        return out

    @staticmethod
    def _open(metas: list[NodeMeta | None], out: list[str]) -> Iterator[tuple[int, NodeMeta]]:
        for i, node in enumerate(metas):
            if not out[i] and node is not None:
                yield i, node

    @staticmethod
    def _restrictions(volumes: PodVolumes, rwop: frozenset[str], rows: Rows, index: PodIndex, out: list[str]) -> None:
        """Same-disk conflicts with the pods on each node; a ReadWriteOncePod claim in use anywhere."""
        if not volumes.disks and not rwop:
            return
        held: dict[int, list[Disk]] = {}
        placed: list[tuple[str, PodVolumes | None]] = []
        for _, other, row in index.with_volumes():
            placed.append((other.namespace, other.volumes))
            if volumes.disks and other.volumes is not None and other.volumes.disks:
                held.setdefault(row, []).extend(other.volumes.disks)
        in_use = bool(rwop) and bool(rwop & restrictions.claims_in_use(placed))
        for i, row in enumerate(rows):
            if out[i]:
                continue
            if volumes.disks and restrictions.disks_conflict(volumes.disks, held.get(int(row), ())):
                out[i] = restrictions.DISK_CONFLICT
            elif in_use:
                out[i] = restrictions.RWOP_CONFLICT

    @staticmethod
    def _limits(
        namespace: str,
        volumes: PodVolumes,
        rows: Rows,
        metas: list[NodeMeta | None],
        index: PodIndex,
        view: VolumeView,
        out: list[str],
    ) -> None:
        """CSI volume limits of each node that has a CSINode with counts."""
        by_row: dict[int, list[tuple[str, PodVolumes]]] | None = None
        for i, node in enumerate(metas):
            if out[i] or node is None:
                continue
            csinode = view.csinode(node.name)
            try:
                new = limits.attachable(namespace, volumes, csinode, view, True)
            except limits.LimitsError as exc:
                out[i] = exc.message
                continue
            allowed = limits.driver_limits(csinode)
            if not new or not allowed:
                continue
            if by_row is None:
                by_row = {}
                for _, other, at in index.with_volumes():
                    if other.volumes is not None:
                        by_row.setdefault(at, []).append((other.namespace, other.volumes))
            attached = [
                limits.attachable(ns, other, csinode, view, False) for ns, other in by_row.get(int(rows[i]), ())
            ]
            if limits.exceeds(new, attached, allowed):
                out[i] = limits.MAX_COUNT
