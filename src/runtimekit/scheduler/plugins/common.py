"""Small helpers shared by the built-in plugins."""

from __future__ import annotations

from collections.abc import Iterable

from runtimekit.model import GpuKind, PodKey, Slot
from runtimekit.scheduler.framework.arguments import ArgumentError, Arguments
from runtimekit.scheduler.framework.binding import Binding
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.status import SUCCESS, Status, error
from runtimekit.scheduler.kubesem.drarequest import is_claim_container

Held = tuple[tuple[tuple[str, tuple[Slot, ...]], ...], str]  # (container, slots) per container, policy


def no_arguments(plugin: str, arguments: Arguments, accepted: Iterable[str] = ()) -> None:
    """Refuse arguments a plugin does not take (naming the first); `accepted` are Volcano keys that
    are read elsewhere or have no effect here and are let through so Volcano confs load unchanged."""
    allowed = set(accepted)
    unknown = sorted(k for k in arguments if k not in allowed)
    if unknown:
        raise ArgumentError(f"{plugin}: unknown argument {unknown[0]!r}")


class HoldsDevices:
    """What a device plugin (`gpushare`, `mig`) does after a node is chosen: Reserve holds the devices
    of its containers (`hold`), Unreserve lets them go, PreBind writes them into the binding. A pod
    asking for `device_kinds` with nothing held was unreserved meanwhile: PreBind fails it, and it
    is scheduled again. Subclasses set `_held = {}` and name what they hold (`held_noun`)."""

    device_kinds: frozenset[GpuKind]
    held_noun = "GPUs"
    _held: dict[PodKey, Held]

    def hold(self, task: TaskInfo, containers: tuple[tuple[str, tuple[Slot, ...]], ...], policy: str) -> None:
        self._held[task.key] = (containers, policy)

    def unreserve(self, task: TaskInfo) -> None:
        self._held.pop(task.key, None)

    def pre_bind(self, binding: Binding) -> Status:
        held = self._held.pop(binding.task.key, None)
        if held is not None:
            # a claim's GPUs reach the pod through the claim's allocation, not the device plugin's assignment
            binding.assign(tuple(c for c in held[0] if not is_claim_container(c[0])), held[1])
        elif any(c.gpu.kind in self.device_kinds for c in binding.task.request.gpus):
            return error(f"no {self.held_noun} are held for the pod (it was unreserved); it is scheduled again")
        return SUCCESS
