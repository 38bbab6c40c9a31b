"""Placement policies for the gpushare plugin, by name."""

from __future__ import annotations

from collections.abc import Callable

from runtimekit.scheduler.plugins.gpushare.policies.base import (
    KeepsCpu,
    Learner,
    LearnsAt,
    PodShape,
    Policy,
    PolicyContext,
    RowLocalPolicy,
    TakesWorkload,
)
from runtimekit.scheduler.plugins.gpushare.policies.baseline import (
    BestFitPolicy,
    BinpackPolicy,
    DotProdPolicy,
    GpuClusteringPolicy,
    GpuPackingPolicy,
    RandomPolicy,
    SpreadPolicy,
)
from runtimekit.scheduler.plugins.gpushare.policies.fgd import FgdPolicy, Fragmentation
from runtimekit.scheduler.plugins.gpushare.policies.packfrag import PackFragPolicy
from runtimekit.scheduler.plugins.gpushare.policies.workload import PodType, TargetWorkload

POLICIES: dict[str, Callable[[], Policy]] = {
    "random": RandomPolicy,
    "dotprod": DotProdPolicy,
    "gpuclustering": GpuClusteringPolicy,
    "gpupacking": GpuPackingPolicy,
    "bestfit": BestFitPolicy,
    "fgd": FgdPolicy,
    "packfrag": PackFragPolicy,
    "binpack": BinpackPolicy,
    "spread": SpreadPolicy,
}
DEFAULT_POLICY = "packfrag"  # allocates more than fgd on every openb list: docs/results/better-than-fgd.md

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "FgdPolicy",
    "Fragmentation",
    "KeepsCpu",
    "Learner",
    "LearnsAt",
    "PackFragPolicy",
    "PodShape",
    "PodType",
    "Policy",
    "PolicyContext",
    "RowLocalPolicy",
    "TakesWorkload",
    "TargetWorkload",
]
