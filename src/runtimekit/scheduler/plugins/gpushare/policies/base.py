"""What a placement policy sees and answers.

A policy scores candidate nodes for a pod (an integer 0-100 per node, higher is better; the
framework breaks ties by the session's node rank) and chooses the GPUs inside the chosen node.
Scores use GPU compute shares (milli) and CPU, as the FGD paper's policies do; GPU memory only
limits which GPUs fit. Pure functions of the node table; callers: the gpushare plugin.

Two optional capabilities, which the plugin sorts its policies by once: a `Learner` learns its
target workload from the pods it is told of, and a policy that `TakesWorkload` can be given one
instead.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, GpuKind, GpuRequest, NodeTable, PodRequest
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload

MAX_SPEC_CPU = 128_000  # the paper's normalisation constants (MaxSpecCpu, MaxSpecGpu)
MAX_SPEC_GPU = 8_000


@dataclass(frozen=True)
class PodShape:
    """A pod as policies see it: CPU milli and its GPU demand (per-GPU milli x count). Its memory
    rides along but is no part of its identity: policies key their caches by shape, and scores
    do not depend on memory (packfrag reads it only to keep hosts of rare pods, see there)."""

    cpu_milli: int
    milli: int = 0  # per GPU; 0 for a CPU-only pod
    count: int = 0  # number of GPUs; 0 for a CPU-only pod
    whole: bool = False
    memory_bytes: int = field(default=0, compare=False)

    @property
    def total_milli(self) -> int:
        return self.milli * self.count

    @property
    def gpu(self) -> bool:
        return self.count > 0

    @property
    def tag(self) -> int:
        """GPU-pod class for clustering: 0 for a share pod, k for a pod of k whole GPUs."""
        return self.count if self.whole else 0

    @classmethod
    def of(cls, request: PodRequest) -> PodShape:
        """The shape of a pod; a pod with several GPU containers is scored by its largest one."""
        gpus = [c.gpu for c in request.gpus if c.gpu.kind is not GpuKind.MIG]
        if not gpus:
            return cls(request.cpu_milli, memory_bytes=request.memory_bytes)
        main = max(gpus, key=lambda g: g.core_milli * g.count)
        return cls(request.cpu_milli, main.core_milli, main.count, main.kind is GpuKind.WHOLE, request.memory_bytes)


@dataclass
class PolicyContext:
    """The node table and the tools a policy may use for one decision."""

    table: NodeTable
    rng: random.Random

    def free(self, rows: IntArray) -> IntArray:
        """Free milli per (row, GPU) counting usable GPUs only; -1 where there is no usable GPU."""
        return np.where(self.table.usable[rows], self.table.core_free[rows], -1)


class Policy(Protocol):
    name: str

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        """An integer score (0-100) per row; every row can hold the pod."""

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        """GPU columns for one container: `req.count` of `fitting` (the columns that can hold it)."""


@runtime_checkable
class RowLocalPolicy(Protocol):
    """A policy whose score of a row may depend on the pod's shape and that row's content (its
    `NodeTable.version`) alone, so that the session keeps the scores per pod signature and rescores
    only the rows that changed (`RowLocalScores`)."""

    def score_key(self, ctx: PolicyContext, shape: PodShape) -> Hashable | None:
        """None when this shape's scores are not row-local now; else a key such that equal keys give
        equal scores on every row of equal version."""


class LearnsAt(Enum):
    """Which pods a `Learner` is told of, each once however often it is retried."""

    FILTER = "filter"  # every pod the plugin filters, whether or not it fits anywhere
    SCORE = "score"  # the pods the plugin scores: those with more than one feasible node


@runtime_checkable
class Learner(Protocol):
    """A policy that learns its target workload from the pods it sees: the gpushare plugin calls
    `learn` once per pod, at the point `learns_at` names, before the pod is scored. Until it has a
    workload it still scores and chooses (each learner says how)."""

    learns_at: LearnsAt

    def learn(self, pod_type: PodType) -> None: ...


@runtime_checkable
class KeepsCpu(Protocol):
    """A policy that keeps part of some nodes' CPU from pods asking no GPU (for the GPUs there)."""

    def keeps_cpu(self) -> bool:
        """Cheap: whether `cpu_kept` may hold any row back now (False: it would answer None)."""

    def cpu_kept(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> npt.NDArray[np.bool_] | None:
        """For a pod of `shape`, the rows (a mask over `rows`) whose CPU it may not take; None: none."""


@runtime_checkable
class TakesWorkload(Protocol):
    """A policy that can be given its target workload instead of learning it."""

    def with_workload(self, workload: TargetWorkload) -> Policy:
        """A fresh policy of this kind that keeps `workload` as its target and learns nothing."""


def best_fit_gpus(ctx: PolicyContext, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
    """Whole GPUs: the lowest-index fitting ones. Shares: the least free that fit, lowest index on ties."""
    columns: list[int] = fitting.tolist()
    if req.kind is GpuKind.WHOLE or req.core_milli >= MILLI:
        return columns[: req.count]
    free = ctx.table.core_free[row].tolist()
    return sorted(columns, key=lambda c: (free[c], c))[: req.count]


def worst_fit_gpus(ctx: PolicyContext, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
    """The most free GPUs first, lowest index on ties (spread inside a node)."""
    columns: list[int] = fitting.tolist()
    if req.kind is GpuKind.WHOLE or req.core_milli >= MILLI:
        return columns[: req.count]
    free = ctx.table.core_free[row].tolist()
    return sorted(columns, key=lambda c: (-free[c], c))[: req.count]


def gpu_totals(free: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Per row: total free milli G, usable GPU count N, fully free GPU count f."""
    valid = free >= 0
    return np.where(valid, free, 0).sum(axis=1), valid.sum(axis=1), (free == MILLI).sum(axis=1)
