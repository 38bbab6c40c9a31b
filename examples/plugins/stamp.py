"""`stamp`: a plugin on the points after the node is chosen (kube-scheduler's Reserve, PreBind and
Bind), next to `gpushare` and `mig`, which hold the chosen GPUs in Reserve and write them into the
binding in PreBind.

- Reserve: at most `stamp.maxInFlight` pods per node may be reserved and not yet on their way to
  the node; one more is refused (it waits for a later session). Unreserve gives the place back.
- PreBind: writes `stamp.example.com/placed` on the pod through its Binding: the node, and the GPU
  indexes the device plugins wrote before it (so list `stamp` after `gpushare` and `mig`).
- Bind: refuses to bind pods of the namespaces in `stamp.holdNamespaces` (a maintenance hold: the
  pod is unreserved and tried again after a back-off); every other pod it skips, so the next Bind
  plugin, at last the scheduler's own binder, binds it.

    tiers:
    - plugins:
      - name: gpushare
      - name: stamp
        arguments: {stamp.maxInFlight: 4, stamp.holdNamespaces: "staging"}
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtimekit.model import PodKey
from runtimekit.scheduler.framework.arguments import ArgumentError, parse_arguments
from runtimekit.scheduler.framework.info import TaskInfo
from runtimekit.scheduler.framework.interfaces import Bind, Binding, DeviceChoice, Plugin, PreBind, Reserve
from runtimekit.scheduler.framework.registry import BuildContext, Registry
from runtimekit.scheduler.framework.status import SKIP, SUCCESS, Status, unschedulable
from runtimekit.scheduler.framework.view import SessionView

ANNOTATION = "stamp.example.com/placed"


@dataclass(frozen=True)
class StampArgs:
    max_in_flight: int = 8
    hold_namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ArgumentError("stamp: maxInFlight must be at least 1")


class Stamp(Plugin, Reserve, PreBind, Bind):
    name = "stamp"

    def __init__(self, args: StampArgs) -> None:
        self.args = args
        self._lock = threading.Lock()  # Reserve runs on the scheduling thread, PreBind on binder threads
        self._in_flight: dict[PodKey, str] = {}  # reserved pod -> its node

    def reserve(self, task: TaskInfo, choice: DeviceChoice, ssn: SessionView) -> Status:
        node = str(task.node)
        with self._lock:
            waiting = sum(1 for n in self._in_flight.values() if n == node)
            if waiting >= self.args.max_in_flight:
                return unschedulable(f"{waiting} pods are already on their way to {node}")
            self._in_flight[task.key] = node
        return SUCCESS

    def unreserve(self, task: TaskInfo) -> None:
        with self._lock:
            self._in_flight.pop(task.key, None)

    def pre_bind(self, binding: Binding) -> Status:
        with self._lock:
            self._in_flight.pop(binding.task.key, None)  # on its way: no longer counted
        gpus = sorted({slot.gpu for _, slots in binding.devices for slot in slots})
        binding.annotations[ANNOTATION] = f"{binding.node} gpus={','.join(map(str, gpus)) or '-'}"
        return SUCCESS

    def bind(self, binding: Binding) -> Status:
        if binding.task.namespace in self.args.hold_namespaces:
            return unschedulable(f"binds in namespace {binding.task.namespace} are on hold")
        return SKIP


def build(arguments: Mapping[str, Any], context: BuildContext) -> Stamp:
    return Stamp(parse_arguments(StampArgs, "stamp", arguments))


def register(registry: Registry) -> None:
    registry.register_plugin("stamp", build)
