"""The `mig` plugin: pods that ask for MIG slices (`<migPrefix><profile>: N`) go to GPUs in MIG mode.

A GPU in static mode offers its existing instances; a GPU in dynamic mode offers every valid
placement whose memory slices are free (the runtime creates the instance at Allocate). Among the
possible placements the plugin picks the one that keeps the largest profiles still placeable: a
GPU's MIG capacity is valued as sum over profiles of weight x instances still placeable, with
weights that make a larger profile count more than all smaller ones together; a node's is the sum
over its GPUs plus, above that, how many pods of 2, 4 or 8 whole GPUs its untouched GPUs could still
take. The pod takes the placement (and the node) that loses least of it — so small slices fill GPUs
that are already cut up, whole GPUs stay free for 7-slice jobs, and whole nodes for multi-GPU ones.

Implements Predicate, NodeOrder, DeviceAllocate, Reserve (holds the chosen slices for the pod until
it is bound or given up) and PreBind (writes them into the binding's assignment). Arguments:
`mig.weight` (default 1),
`mig.policy` (`capacity`, the default, or `firstfit`: the first free slot on the first node).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from runtimekit.model import GpuKind, MigMode, PodKey, Slot
from runtimekit.model.mig import MigGeometry, mask, placeable
from runtimekit.model.migstate import MigGpuState
from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments, parse_arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    DeviceAllocate,
    DeviceChoice,
    DeviceKinds,
    Plugin,
    PreBind,
    Predicate,
    PrePredicate,
    Reserve,
    RowLocalScores,
    Rows,
    Scores,
    Verdict,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, unschedulable
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.plugins.common import Held, HoldsDevices

NAME = "mig"


POLICIES = ("capacity", "firstfit")


@dataclass(frozen=True)
class MigArgs:
    weight: float = 1.0
    policy: str = "capacity"  # capacity: lose least large-profile capacity; firstfit: first free slot

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ArgumentError(f"{NAME}: weight must not be negative")
        if self.policy not in POLICIES:
            raise ArgumentError(f"{NAME}: unknown policy {self.policy!r}; known: {', '.join(POLICIES)}")


@functools.lru_cache(maxsize=64)
def _weights(geo: MigGeometry) -> dict[str, int]:
    ordered = sorted(geo.profiles, key=lambda p: (p.size, p.compute_slices))
    return {p.name: (geo.slices + 1) ** i for i, p in enumerate(ordered)}


@functools.lru_cache(maxsize=64)
def _sizes(geo: MigGeometry) -> dict[str, int]:
    """Each profile's size in memory slices, by name."""
    return {p.name: p.size for p in geo.profiles}


@functools.lru_cache(maxsize=1 << 16)
def _dynamic_value(geo: MigGeometry, occupied: int) -> int:
    weights = _weights(geo)
    return sum(weights[name] * count for name, count in placeable(geo, occupied).items())


def value(state: MigGpuState, occupied: int) -> int:
    """A GPU's remaining MIG capacity: larger profiles dominate."""
    if state.mode is MigMode.STATIC:
        weights, sizes = _weights(state.geometry), _sizes(state.geometry)
        return sum(weights[p] for s, p in state.instances.items() if not occupied & mask(s, sizes[p]))
    return _dynamic_value(state.geometry, occupied)


@dataclass(frozen=True)
class Choice:
    slots: tuple[Slot, ...]
    before: int
    after: int


MULTI_GPU_SIZES = (2, 4, 8)


def _multi_gpu(whole: int, top: int) -> int:
    """The value of `whole` untouched GPUs together: pods of 2, 4 or 8 of them, above any one GPU's."""
    return sum(2 * top * k * (whole // k) for k in MULTI_GPU_SIZES)


def node_value(states: Mapping[int, MigGpuState], occupied: Mapping[int, int]) -> int:
    """A node's MIG capacity: every GPU's (larger profiles dominate) plus, above all of it, how many
    pods of 2, 4 or 8 whole GPUs its untouched dynamic GPUs could still take together."""
    total = sum(value(st, occupied[g]) for g, st in states.items())
    whole = sum(1 for g, st in states.items() if st.mode is MigMode.DYNAMIC and not occupied[g])
    top = max((value(st, 0) for st in states.values()), default=0)
    return total + _multi_gpu(whole, top)


def _largest_first(states: Mapping[int, MigGpuState], wants: list[tuple[str, int]]) -> list[tuple[str, int]]:
    def size(want: tuple[str, int]) -> int:
        sizes = [p.size for st in states.values() if (p := st.geometry.profile(want[0])) is not None]
        return max(sizes, default=0)

    return sorted(wants, key=lambda w: -size(w))


def plan(states: Mapping[int, MigGpuState], wants: list[tuple[str, int]], first_fit: bool = False) -> Choice | None:
    """Place every wanted (profile, count) on the node's MIG GPUs, greedily, each instance where the
    node loses least capacity (`node_value`; ties: a GPU already cut up, then the lowest GPU and
    slice), or with `first_fit` at the lowest GPU and slice that is free. None if it does not fit."""
    occupied = {g: st.occupied for g, st in states.items()}
    before = node_value(states, occupied)
    # the node's value changes only through the GPU a slot is taken on, and the count of untouched GPUs
    per_gpu = {g: value(st, occupied[g]) for g, st in states.items()}
    top = max((value(st, 0) for st in states.values()), default=0)
    whole = sum(1 for g, st in states.items() if st.mode is MigMode.DYNAMIC and not occupied[g])
    slots: list[Slot] = []
    for profile_name, count in _largest_first(states, wants):
        for _ in range(count):
            best: tuple[tuple[int, int, int, int], int, int] | None = None
            for g, st in states.items():
                profile = st.geometry.profile(profile_name)
                if profile is None:
                    continue
                current = occupied[g]
                scratch = MigGpuState(st.geometry, st.mode, st.instances, current)
                untouched = st.mode is MigMode.DYNAMIC and not current
                multi_loss = _multi_gpu(whole, top) - _multi_gpu(whole - 1, top) if untouched else 0
                for start in scratch.options(profile_name):
                    loss = 0 if first_fit else per_gpu[g] - value(st, current | mask(start, profile.size)) + multi_loss
                    key = (loss, 0 if current or first_fit else 1, g, start)
                    if best is None or key < best[0]:
                        best = (key, g, start)
            if best is None:
                return None
            _, g, start = best
            profile = states[g].geometry.profile(profile_name)
            assert profile is not None
            whole -= 1 if states[g].mode is MigMode.DYNAMIC and not occupied[g] else 0
            occupied[g] |= mask(start, profile.size)
            per_gpu[g] = value(states[g], occupied[g])
            slots.append(Slot(g, 0, profile.memory_mib, profile_name, start))
    return Choice(tuple(slots), before, node_value(states, occupied))


class Mig(HoldsDevices, Plugin, PrePredicate, Predicate, RowLocalScores, DeviceAllocate, DeviceKinds, Reserve, PreBind):
    name = NAME
    device_kinds = frozenset({GpuKind.MIG})
    held_noun = "MIG slices"

    def __init__(self, args: MigArgs) -> None:
        self.args = args
        self._first_fit = args.policy == "firstfit"
        self._plans: dict[tuple[tuple[tuple[str, int], ...], int, int], Choice | None] = {}
        # slices held for placed pods until PreBind writes them (or Unreserve gives them up);
        # written by the scheduling thread, read by binder threads (single dict operations only)
        self._held: dict[PodKey, Held] = {}

    @staticmethod
    def _wants(task: TaskInfo) -> list[tuple[str, int]]:
        return [(c.gpu.mig_profile, c.gpu.count) for c in task.request.gpus if c.gpu.kind is GpuKind.MIG]

    def _plan(self, task: TaskInfo, row: int, ssn: SessionView) -> Choice | None:
        """The plan for what the task wants on a row, cached by the row's version (which covers its
        MIG slices), so pods asking alike share it until the node changes."""
        wants = tuple(self._wants(task))
        key = (wants, row, int(ssn.table.version[row]))
        if key not in self._plans:
            if len(self._plans) > 200_000:
                self._plans.clear()
            states = ssn.table.mig.get(row, {})
            self._plans[key] = plan(states, list(wants), self._first_fit) if states else None
        return self._plans[key]

    def pre_predicate(self, task: TaskInfo) -> Status:
        return SUCCESS if self._wants(task) else SKIP  # no slice asked for: nothing to check

    def predicate(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Verdict:
        wants = self._wants(task)
        if not wants:
            return Verdict.all(rows.size)
        mig_rows = ssn.table.mig
        passed = np.array([r in mig_rows and self._plan(task, r, ssn) is not None for r in rows.tolist()], np.bool_)
        profiles = ", ".join(sorted({p for p, _ in wants}))

        def no_mig() -> np.ndarray:
            return np.array([not ssn.table.mig.get(int(r)) for r in rows.tolist()], np.bool_)

        def explain() -> list[tuple[str, np.ndarray]]:
            return [("no GPU in MIG mode", ~passed & no_mig()), (f"no free MIG slot for {profiles}", ~passed)]

        return Verdict(passed, explain, unresolvable=no_mig)

    def row_local_key(self, task: TaskInfo, ssn: SessionView) -> Hashable | None:
        """Row-local (`RowLocalScores`) for the pods scored 0 everywhere; the others keep the full call."""
        return 0 if self._first_fit or not self._wants(task) else None

    def node_order(self, task: TaskInfo, rows: Rows, ssn: SessionView) -> Scores:
        if not self._wants(task) or self._first_fit:  # first fit: the node order alone decides
            return np.zeros(rows.size)
        scores = np.zeros(rows.size)
        for i, row in enumerate(rows.tolist()):
            choice = self._plan(task, row, ssn)
            if choice is not None:
                # 100 when nothing is lost, 50 when one whole GPU's capacity is, falling from there
                unit = max((value(st, 0) for st in ssn.table.mig[row].values()), default=1)
                scores[i] = 100.0 / (1.0 + (choice.before - choice.after) / unit)
        return scores * self.args.weight

    def allocate_devices(self, task: TaskInfo, row: int, ssn: SessionView) -> DeviceChoice | Status | None:
        migs = [c for c in task.request.gpus if c.gpu.kind is GpuKind.MIG]
        if not migs:
            return None
        states = ssn.table.mig.get(row, {})
        chosen: list[tuple[str, tuple[Slot, ...]]] = []
        scratch = {g: MigGpuState(st.geometry, st.mode, st.instances, st.occupied) for g, st in states.items()}
        for container in migs:
            choice = plan(scratch, [(container.gpu.mig_profile, container.gpu.count)], self._first_fit)
            if choice is None:
                return unschedulable(
                    f"container {container.container}: no free MIG slot for {container.gpu.mig_profile}"
                )
            for slot in choice.slots:
                scratch[slot.gpu].take(slot.mig_profile, slot.mig_start)
            chosen.append((container.container, choice.slots))
        return DeviceChoice(tuple(chosen), "mig")

    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        names = {c.container for c in task.request.gpus if c.gpu.kind is GpuKind.MIG}
        if names:
            self.hold(task, tuple(c for c in choice.containers if c[0] in names), "mig")
        return SUCCESS


def build(arguments: Arguments, context: BuildContext) -> Mig:
    return Mig(parse_arguments(MigArgs, NAME, arguments))
