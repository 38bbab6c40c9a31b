"""The paper's allocation columns (docs/fgd-method.md §2.4): after every pod event, arrived GPU
milli A and allocated milli U as % of capacity; column k is the mean allocation over the events
whose rounded arrived % is k (or k-1..k+1 when none is), rounded to 2 decimals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bucket_columns(
    arrived: Sequence[int], used: Sequence[int], total_gpus: int, last: int = 130
) -> dict[str, float | None]:
    arrived_pct = np.array([round(a / total_gpus / 10) for a in arrived], np.int64)
    alloc_pct = np.array([round(u / total_gpus / 10, 2) for u in used], np.float64)
    out: dict[str, float | None] = {}
    for k in range(last + 1):
        hit = arrived_pct == k
        if not hit.any():
            hit = (arrived_pct >= k - 1) & (arrived_pct <= k + 1)
        out[str(k)] = round(float(alloc_pct[hit].mean()), 2) if hit.any() else None
    return out
