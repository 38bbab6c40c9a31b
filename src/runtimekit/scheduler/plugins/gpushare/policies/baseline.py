"""The baseline policies of the FGD paper (docs/fgd-method.md §5) and GPU-level binpack and spread.

random        one feasible node uniformly at random; a random fitting GPU
dotprod       the smallest dot product of node free and pod request (normalised by max specs)
gpuclustering nodes already holding pods of the same GPU class first
gpupacking    partly used GPUs first, then idle GPUs, idle nodes last
bestfit       the least CPU and GPU left after placement
binpack       the node whose GPUs are fullest after placement (GPU level), best-fit GPU
spread        the node whose GPUs are emptiest after placement, the most free GPU
"""

from __future__ import annotations

import numpy as np

from runtimekit.model import MILLI, GpuRequest
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    PodShape,
    PolicyContext,
    best_fit_gpus,
    gpu_totals,
    worst_fit_gpus,
)


class BestFitChoice:
    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        del shape
        return best_fit_gpus(ctx, req, row, fitting)


class RandomPolicy:
    name = "random"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        del shape
        scores = np.zeros(rows.size, np.int64)
        scores[ctx.rng.randrange(rows.size)] = 100
        return scores

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        del shape, row
        if req.core_milli >= MILLI or req.count > 1:
            return [int(c) for c in fitting[: req.count]]
        return [int(fitting[ctx.rng.randrange(fitting.size)])]


class DotProdPolicy(BestFitChoice):
    name = "dotprod"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        total = ctx.table.gpu_sum[rows]
        cpu = ctx.table.cpu_free[rows]
        dot = (cpu / MAX_SPEC_CPU) * (shape.cpu_milli / MAX_SPEC_CPU) + (total / MAX_SPEC_GPU) * (
            shape.total_milli / MAX_SPEC_GPU
        )
        return np.floor(100 * (1 - dot / 2)).astype(np.int64)


class GpuClusteringPolicy(BestFitChoice):
    name = "gpuclustering"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        if not shape.gpu:
            return np.zeros(rows.size, np.int64)
        total = ctx.table.gpu_sum[rows]
        base = (25 * (MAX_SPEC_GPU - total)) // MAX_SPEC_GPU
        tags = ctx.table.gpu_pods[rows]
        tag = min(shape.tag, tags.shape[1] - 1)
        same = tags[:, tag] > 0
        all_pods = tags.sum(axis=1)
        others = all_pods - tags[:, tag] > 0
        bonus = np.where(all_pods == 0, 25, np.where(same & ~others, 75, np.where(same, 50, 0)))
        return (bonus + base).astype(np.int64)


class GpuPackingPolicy(BestFitChoice):
    name = "gpupacking"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        if not shape.gpu:
            return np.zeros(rows.size, np.int64)
        free = ctx.free(rows)
        _, count, fully = gpu_totals(free)
        idle_score = np.maximum(33 - fully, fully)
        ordered = np.sort(free, axis=1)
        fits = ordered >= shape.milli
        taken = fits & (np.cumsum(fits, axis=1) <= shape.count)
        taken_free = (taken & (ordered == MILLI)).sum(axis=1)
        pct = (np.where(taken, ordered, 0) // 10).sum(axis=1)
        partial_score = np.where(taken_free > 0, np.maximum(50 - taken_free, 33), np.maximum(100 - pct // 10, 50))
        return np.where(fully == count, idle_score, partial_score).astype(np.int64)


class BestFitPolicy(BestFitChoice):
    name = "bestfit"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        total = ctx.table.gpu_sum[rows]
        cpu = ctx.table.cpu_free[rows]
        # floor(100 * (1 - (0.5 (c - r)/128000 + 0.5 (G - R)/8000))) in exact integer arithmetic:
        # floor((100 D - 400000 (c - r) - 6400000 (G - R)) / D) with D = 128000 * 8000
        scale = MAX_SPEC_CPU * MAX_SPEC_GPU
        constant = 100 * scale + 400_000 * shape.cpu_milli + 6_400_000 * shape.total_milli
        scores: IntArray = (constant - 400_000 * cpu - 6_400_000 * total) // scale
        return scores


class BinpackPolicy(BestFitChoice):
    name = "binpack"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        if not shape.gpu:
            return np.zeros(rows.size, np.int64)
        total, count = ctx.table.gpu_sum[rows], ctx.table.gpu_usable[rows]
        capacity = np.maximum(count * MILLI, 1)
        return (100 * (capacity - total + shape.total_milli)) // capacity


class SpreadPolicy:
    name = "spread"

    def score(self, ctx: PolicyContext, shape: PodShape, rows: IntArray) -> IntArray:
        if not shape.gpu:
            return np.zeros(rows.size, np.int64)
        total, count = ctx.table.gpu_sum[rows], ctx.table.gpu_usable[rows]
        capacity = np.maximum(count * MILLI, 1)
        return (100 * (total - shape.total_milli)) // capacity

    def choose(self, ctx: PolicyContext, shape: PodShape, req: GpuRequest, row: int, fitting: IntArray) -> list[int]:
        del shape
        return worst_fit_gpus(ctx, req, row, fitting)
