"""A pod's GPU constraints (`TaskInfo.gpu_select`: models and UUIDs to use or avoid) applied to the
node table: the gpushare plugin checks the fit and picks the GPUs on a copy of the session's table in
which the GPUs the pod may not use are not usable, so every fit rule, reason and policy applies
unchanged to the GPUs that remain. Nodes without any allowed GPU fail with the constraint's own reason
(`GpuSelector.reason`), and no eviction helps them; under HAMi's `mutex` the GPUs holding a share
are not usable either, and nodes whose allowed GPUs all hold one fail saying so (evictions may help).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from runtimekit.model import GpuSelector, NodeTable
from runtimekit.model.ledger import BoolArray, IntArray
from runtimekit.model.selector import IN_USE, MODELS, UUIDS
from runtimekit.scheduler.framework.info import JobInfo, JobKey, QueueInfo, Snapshot
from runtimekit.scheduler.framework.state import CycleState
from runtimekit.scheduler.framework.view import SessionView


@dataclass(frozen=True)
class Restriction:
    """The session's table with only the allowed GPUs usable, and per row why none is allowed."""

    table: NodeTable
    no_model: BoolArray  # rows (all of the table's) where the model constraint rules out every GPU
    no_uuid: BoolArray  # rows where the models allow some GPU but the UUID constraint none
    in_use: BoolArray  # rows where the GPUs the models and UUIDs allow all hold a share (`mutex`)


def restrict(table: NodeTable, selector: GpuSelector, rows: IntArray | None = None) -> Restriction:
    """A copy of `table` in which GPUs the selector rules out are unusable (as unhealthy GPUs are), on
    `rows` (default: every node's row). A row where every GPU is ruled out is left as it is: the
    predicate fails it by `no_model` / `no_uuid` whatever the copy says."""
    out = table.copy()
    no_model = np.zeros(table.rows, np.bool_)
    no_uuid = np.zeros(table.rows, np.bool_)
    in_use = np.zeros(table.rows, np.bool_)
    model_ok: dict[str, bool] = {}  # a cluster has few models: match each once
    names = table.names()
    for row in (table.active_rows() if rows is None else rows).tolist():
        name = names[row]
        if name is None:
            continue
        inventory = table.inventory(name)
        if not inventory.gpus:
            continue
        verdicts = []
        for gpu in inventory.gpus:
            if gpu.model not in model_ok:
                model_ok[gpu.model] = selector.model_ok(gpu.model)
            verdicts.append(
                "" if model_ok[gpu.model] and selector.uuid_ok(gpu.uuid) else (UUIDS if model_ok[gpu.model] else MODELS)
            )
        if all(v == MODELS for v in verdicts):
            no_model[row] = True
            continue
        if all(verdicts):
            no_uuid[row] = True
            continue
        if selector.unused_only:
            held = table.holders[row, : len(verdicts)].tolist()
            verdicts = [v or (IN_USE if n > 0 else "") for v, n in zip(verdicts, held, strict=True)]
            if all(verdicts):
                in_use[row] = True
                continue
        ruled_out = {gpu.uuid for gpu, v in zip(inventory.gpus, verdicts, strict=True) if v}
        if ruled_out:
            unhealthy = {gpu.uuid for gpu in inventory.gpus if not gpu.healthy}
            out.set_node(inventory.with_health(sorted(unhealthy | ruled_out)), table.capacity(name))
    return Restriction(out, no_model, no_uuid, in_use)


class RestrictedView:
    """A session view whose table is a restriction's (everything else is the session's)."""

    def __init__(self, ssn: SessionView, table: NodeTable) -> None:
        self._ssn, self._table = ssn, table

    @property
    def state(self) -> CycleState:
        return self._ssn.state

    @property
    def snapshot(self) -> Snapshot:
        return self._ssn.snapshot

    @property
    def table(self) -> NodeTable:
        return self._table

    @property
    def jobs(self) -> Mapping[JobKey, JobInfo]:
        return self._ssn.jobs

    @property
    def queues(self) -> Mapping[str, QueueInfo]:
        return self._ssn.queues

    @property
    def now(self) -> float:
        return self._ssn.now
