"""A placement on its way to its node: the `Binding` that PreBind plugins prepare and Bind plugins
carry out, and `BindHooks`, the framework's side of a bind as a cache sees it.

The order is kube-scheduler's: after the statement places a task on a node, Reserve plugins hold
what they keep for it; on commit the cache books the placement ("assumes" it) and, on its own
time (a binder thread in a live scheduler), runs PreBind then Bind; any failure after Reserve —
a failed Reserve, PreBind or bind, a discarded statement, a session that ends with the task not
bound — calls every Reserve plugin's Unreserve, which is idempotent.

A leaf below the session: it imports only the framework's value modules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from runtimekit.model import Assignment, NodeInventory, NodeName, Slot, shares_for
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.status import Status
from runtimekit.scheduler.framework.values import DeviceChoice


@dataclass(slots=True)
class Binding:
    """One pod's binding: the task (its `node` and `placement` set), the devices chosen for it in
    the session, the annotations the Binding will carry, and the device assignment PreBind plugins
    write (`assign`). The cache posts it after PreBind (or a Bind plugin binds it); the assignment
    becomes the protocol's assignment annotation there, with the node's GPU UUIDs."""

    task: TaskInfo
    node: NodeName
    choice: DeviceChoice
    annotations: dict[str, str] = field(default_factory=dict)
    devices: list[tuple[str, tuple[Slot, ...]]] = field(default_factory=list)  # container -> its slots
    policies: list[str] = field(default_factory=list)

    def assign(self, containers: Iterable[tuple[str, tuple[Slot, ...]]], policy: str) -> None:
        """Write devices into the binding's assignment: the slots of each container, and the policy
        that chose them (policies of several plugins are joined with `+`)."""
        self.devices.extend(containers)
        if policy:
            self.policies.append(policy)

    def assignment(self, inventory: NodeInventory) -> Assignment:
        """The assignment as the device plugin and the runtime read it (GPU UUIDs from `inventory`)."""
        return Assignment(
            self.node, {name: shares_for(slots, inventory) for name, slots in self.devices}, "+".join(self.policies)
        )


class BindHooks(Protocol):
    """The plugins' part of a bind, as a cache calls it (outside the session; in a live scheduler on
    a binder thread, so plugins must not use the session there)."""

    def pre_bind(self, binding: Binding) -> Status:
        """Every PreBind plugin in order; the first failure (stamped with the plugin) or success."""

    def bind(self, binding: Binding) -> Status:
        """Bind plugins in order until one handles the pod: its status; SKIP when none did (the
        cache's own binder binds it then)."""

    def unreserve(self, task: TaskInfo) -> None:
        """Every Reserve plugin's Unreserve, in reverse order (idempotent)."""
