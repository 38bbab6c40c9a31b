"""The `mig` plugin: pods that ask for MIG slices (`<migPrefix><profile>: N`) go to GPUs in MIG mode.

A GPU in static mode offers its existing instances; a GPU in dynamic mode offers every valid
placement whose memory slices are free (the runtime creates the instance at Allocate). Among the
possible placements the plugin picks the one that keeps the largest profiles still placeable: a
node's MIG capacity is valued as sum over profiles of weight x instances still placeable, with
weights that make a larger profile count more than all smaller ones together, and the pod takes
the placement (and the node) that loses least of it — so small slices fill GPUs that are already
cut up and whole GPUs stay free for 7-slice jobs.

Implements Predicate, NodeOrder and DeviceAllocate. Arguments: `mig.weight` (default 1),
`mig.policy` (`capacity`, the default, or `firstfit`: the first free slot on the first node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtimekit.model import GpuKind, Slot
from runtimekit.model.mig import MigGeometry, mask, placeable
from runtimekit.model.migstate import MigGpuState
from runtimekit.scheduler.framework.arguments import ArgumentError, parse_arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import (
    DeviceAllocate,
    DeviceChoice,
    NodeOrder,
    Plugin,
    Predicate,
    Rows,
    Scores,
    Verdict,
)
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.status import Status, unschedulable

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


def _weights(geo: MigGeometry) -> dict[str, int]:
    ordered = sorted(geo.profiles, key=lambda p: (p.size, p.compute_slices))
    return {p.name: (geo.slices + 1) ** i for i, p in enumerate(ordered)}


def value(state: MigGpuState, occupied: int) -> int:
    """A GPU's remaining MIG capacity: larger profiles dominate."""
    weights = _weights(state.geometry)
    if state.mode.value == "static":
        free = [(s, p) for s, p in state.instances.items() if not occupied & mask(s, state.geometry.profile(p).size)]  # type: ignore[union-attr]
        return sum(weights[p] for _, p in free)
    return sum(weights[name] * count for name, count in placeable(state.geometry, occupied).items())


@dataclass(frozen=True)
class Choice:
    slots: tuple[Slot, ...]
    before: int
    after: int


def plan(states: Mapping[int, MigGpuState], wants: list[tuple[str, int]], first_fit: bool = False) -> Choice | None:
    """Place every wanted (profile, count) on the node's MIG GPUs, greedily, each instance where it
    loses least capacity (ties: a GPU already cut up, then the lowest GPU and slice), or with
    `first_fit` at the lowest GPU and slice that is free. None if it does not fit."""
    occupied = {g: st.occupied for g, st in states.items()}
    before = sum(value(st, occupied[g]) for g, st in states.items())
    slots: list[Slot] = []
    order = sorted(
        wants,
        key=lambda w: (
            -max(
                (
                    st.geometry.profile(w[0]).size  # type: ignore[union-attr]
                    for st in states.values()
                    if st.geometry.profile(w[0])
                ),
                default=0,
            )
        ),
    )
    for profile_name, count in order:
        for _ in range(count):
            best: tuple[tuple[int, int, int, int], int, int] | None = None
            for g, st in states.items():
                profile = st.geometry.profile(profile_name)
                if profile is None:
                    continue
                current = occupied[g]
                scratch = MigGpuState(st.geometry, st.mode, st.instances, current)
                for start in scratch.options(profile_name):
                    after = current | mask(start, profile.size)
                    loss = 0 if first_fit else value(st, current) - value(st, after)
                    key = (loss, 0 if current or first_fit else 1, g, start)
                    if best is None or key < best[0]:
                        best = (key, g, start)
            if best is None:
                return None
            _, g, start = best
            profile = states[g].geometry.profile(profile_name)
            assert profile is not None
            occupied[g] |= mask(start, profile.size)
            slots.append(Slot(g, 0, profile.memory_mib, profile_name, start))
    after = sum(value(st, occupied[g]) for g, st in states.items())
    return Choice(tuple(slots), before, after)


class Mig(Plugin, Predicate, NodeOrder, DeviceAllocate):
    name = NAME

    def __init__(self, args: MigArgs) -> None:
        self.args = args
        self._first_fit = args.policy == "firstfit"
        self._plans: dict[tuple[tuple[tuple[str, int], ...], int, int], Choice | None] = {}

    @staticmethod
    def _wants(task: TaskInfo) -> list[tuple[str, int]]:
        return [(c.gpu.mig_profile, c.gpu.count) for c in task.request.gpus if c.gpu.kind is GpuKind.MIG]

    def _plan(self, task: TaskInfo, row: int, ssn: Any) -> Choice | None:
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

    def predicate(self, task: TaskInfo, rows: Rows, ssn: Any) -> Verdict:
        wants = self._wants(task)
        if not wants:
            return Verdict.all(rows.size)
        mig_rows = ssn.table.mig
        passed = np.array([r in mig_rows and self._plan(task, r, ssn) is not None for r in rows.tolist()], np.bool_)
        profiles = ", ".join(sorted({p for p, _ in wants}))

        def explain() -> list[tuple[str, np.ndarray]]:
            no_mig = np.array([not ssn.table.mig.get(int(r)) for r in rows], np.bool_)
            return [("no GPU in MIG mode", ~passed & no_mig), (f"no free MIG slot for {profiles}", ~passed)]

        return Verdict(passed, explain)

    def node_order(self, task: TaskInfo, rows: Rows, ssn: Any) -> Scores:
        if not self._wants(task) or self._first_fit:  # first fit: the node order alone decides
            return np.zeros(rows.size)
        scores = np.zeros(rows.size)
        for i, row in enumerate(rows.tolist()):
            choice = self._plan(task, row, ssn)
            if choice is not None and choice.before > 0:
                scores[i] = np.floor(100.0 * choice.after / choice.before)
        return scores * self.args.weight

    def allocate_devices(self, task: TaskInfo, row: int, ssn: Any) -> DeviceChoice | Status | None:
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


def build(arguments: Mapping[str, Any], context: BuildContext) -> Mig:
    return Mig(parse_arguments(MigArgs, NAME, arguments))
