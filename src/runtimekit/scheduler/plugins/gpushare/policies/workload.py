"""The target workload FGD measures fragmentation against: the most popular pod types and their
frequencies (docs/fgd-method.md §6.1).

A type is (CPU milli, per-GPU milli, GPU count, allowed GPU models). Types are counted per pod,
sorted by count (ties: the larger (cpu, milli, count, models) first), kept from the top until they
cover `coverage` of all pods, and renormalised. Built from a pod list given up front (trace
replay, a file) or from the pods a live scheduler has seen (`from_types`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, order=True)
class PodType:
    cpu_milli: int
    milli: int  # per GPU; 0 for CPU-only
    count: int  # GPUs; 0 for CPU-only
    models: str = ""  # allowed GPU models, '|'-separated; "" = any

    @property
    def cpu_only(self) -> bool:
        return self.count == 0 or self.milli == 0

    def allowed(self) -> frozenset[str] | None:
        return frozenset(self.models.split("|")) if self.models else None


@dataclass(frozen=True)
class TargetWorkload:
    types: tuple[PodType, ...]
    probabilities: npt.NDArray[np.float64]
    coverage: float = 0.95

    @classmethod
    def from_types(cls, pods: Iterable[PodType], coverage: float = 0.95) -> TargetWorkload:
        return cls.from_counts(Counter(pods), coverage)

    @classmethod
    def from_counts(cls, seen: Mapping[PodType, int], coverage: float = 0.95) -> TargetWorkload:
        """`from_types` of pods counted already (types counted zero or less are not there): what a
        learner that keeps its counts up to date pays instead of counting its whole window again."""
        counts = {pod_type: count for pod_type, count in seen.items() if count > 0}
        if not counts:
            raise ValueError("a target workload needs at least one pod")
        total = sum(counts.values())
        ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        kept: list[tuple[PodType, int]] = []
        covered = 0
        for pod_type, count in ordered:
            kept.append((pod_type, count))
            covered += count
            if covered >= coverage * total:
                break
        weights = np.array([c for _, c in kept], np.float64)
        return cls(tuple(t for t, _ in kept), weights / weights.sum(), coverage)

    def __len__(self) -> int:
        return len(self.types)
