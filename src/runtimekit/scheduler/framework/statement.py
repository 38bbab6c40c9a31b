"""A statement: changes to the session that commit or discard as a unit (gangs and multi-GPU
placement need this). Each operation changes the session's table and task at once, and a placed
task is reserved by the Reserve plugins; the cache work (bind, evict) waits for `commit`, and
`discard` undoes the operations in reverse order (unreserving what was reserved).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from runtimekit.model import LedgerError, NodeName, NodeTable, Placement
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks
from runtimekit.scheduler.framework.cache import Cache
from runtimekit.scheduler.framework.info import TaskInfo, TaskStatus
from runtimekit.scheduler.framework.status import SUCCESS, Status
from runtimekit.scheduler.framework.values import DeviceChoice


class ReserveError(LedgerError):
    """A Reserve plugin refused a placement (the placement was undone); `status` says why."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class Host(Protocol):
    """What a statement works on (the session): its table, the cache that carries out commits, how
    a choice becomes a placement, the event handlers to tell and the Reserve plugins to run."""

    @property
    def table(self) -> NodeTable: ...

    @property
    def cache(self) -> Cache: ...

    @property
    def bind_cycle(self) -> BindHooks: ...

    def placement(self, task: TaskInfo, row: int, choice: DeviceChoice) -> Placement: ...

    def fire(self, allocated: bool, task: TaskInfo) -> None: ...

    def reserve(self, task: TaskInfo, choice: DeviceChoice) -> Status: ...

    def unreserve(self, task: TaskInfo) -> None: ...

    def hand_over(self, task: TaskInfo) -> None: ...


class _Op(NamedTuple):
    kind: str  # allocate | pipeline | evict
    task: TaskInfo
    choice: DeviceChoice | None
    reason: str
    prior_status: TaskStatus
    prior_node: NodeName | None
    prior_placement: Placement | None


class Statement:
    def __init__(self, ssn: Host) -> None:
        self.ssn = ssn
        self.ops: list[_Op] = []
        self.done = False

    def _take(self, kind: str, task: TaskInfo, row: int, choice: DeviceChoice, status: TaskStatus) -> None:
        ssn = self.ssn
        placement = ssn.placement(task, row, choice)
        ssn.table.take(placement)  # raises LedgerError and changes nothing if it does not fit
        prior_status, prior_node, prior_placement = task.status, task.node, task.placement
        task.status, task.node, task.placement = status, placement.node, placement
        reserved = ssn.reserve(task, choice)
        if reserved is not SUCCESS and not reserved.ok:
            ssn.table.give(placement)
            task.status, task.node, task.placement = prior_status, prior_node, prior_placement
            raise ReserveError(reserved)
        self.ops.append(_Op(kind, task, choice, "", prior_status, prior_node, prior_placement))
        ssn.fire(True, task)

    def allocate(self, task: TaskInfo, row: int, choice: DeviceChoice) -> None:
        """Give the task its placement now; it is bound on commit. Raises LedgerError if it does not
        fit (ReserveError when a Reserve plugin refuses it)."""
        self._take("allocate", task, row, choice, TaskStatus.ALLOCATED)

    def pipeline(self, task: TaskInfo, row: int, choice: DeviceChoice) -> None:
        """Hold the placement for the task until resources being released arrive (not bound)."""
        self._take("pipeline", task, row, choice, TaskStatus.PIPELINED)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Give back the task's placement in this session; the pod is deleted on commit."""
        if task.placement is None:
            raise LedgerError(f"task {task.key} holds nothing to evict")
        self.ssn.table.give(task.placement)
        self.ops.append(_Op("evict", task, None, reason, task.status, task.node, task.placement))
        task.status = TaskStatus.RELEASING
        self.ssn.fire(False, task)

    def commit(self) -> None:
        """Carry out every operation through the cache (bind, evict). A pipelined task stays reserved
        until the session ends (it binds in a later session). The tasks of one job allocated here
        together (a gang that needed them all) bind as a group: all or none (`BindGroup`)."""
        self.done = True
        ssn = self.ssn
        groups = _bind_groups(self.ops) if len(self.ops) > 1 else {}  # one op (most commits): no group
        for op in self.ops:
            if op.kind == "allocate" and op.choice is not None:
                op.task.status = TaskStatus.BINDING
                ssn.hand_over(op.task)
                group = groups.get(op.task.job)
                if group is None:
                    ssn.cache.bind(op.task, op.choice, ssn.bind_cycle)
                else:
                    ssn.cache.bind(op.task, op.choice, ssn.bind_cycle, group)
            elif op.kind == "evict":
                ssn.cache.evict(op.task, op.reason)
        self.ops.clear()

    def discard(self) -> None:
        """Undo every operation, newest first."""
        self.done = True
        table = self.ssn.table
        for op in reversed(self.ops):
            task = op.task
            if op.kind == "evict":
                assert op.prior_placement is not None
                table.take(op.prior_placement, allow_unusable=True)
                task.status = op.prior_status
                self.ssn.fire(True, task)
            else:
                assert task.placement is not None
                self.ssn.unreserve(task)
                table.give(task.placement)
                task.status, task.node, task.placement = op.prior_status, op.prior_node, op.prior_placement
                self.ssn.fire(False, task)
        self.ops.clear()

    @property
    def empty(self) -> bool:
        return not self.ops


def _bind_groups(ops: list[_Op]) -> dict[str, BindGroup]:
    """A `BindGroup` for each job with more than one task allocated among `ops` (a plain dict count:
    `Counter` costs a Mapping check per commit on the per-pod path)."""
    per_job: dict[str, int] = {}
    for op in ops:
        if op.kind == "allocate" and op.choice is not None:
            per_job[op.task.job] = per_job.get(op.task.job, 0) + 1
    return {job: BindGroup(count) for job, count in per_job.items() if count > 1}
