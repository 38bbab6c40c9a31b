"""GPU fit as plain functions over the node table: which rows can take a container's GPU request,
why the others cannot, and which GPUs of a row could hold it. Used by the gpushare plugin in the
live scheduler and in trace replay, and by the tests.

A GPU fits a share when it has the compute and memory the share asks free. Under a protocol with a
split count (`split`: `resources.gpuReplicas` above 1, HAMi's and Volcano vGPU's `deviceSplitCount`)
their per-card rules apply as well (HAMi's `pkg/device/nvidia` Fit, Volcano's vGPU predicate): a GPU
holds at most `split` shares, as kubelet has only that many of its devices to give; a share of all of a
GPU's compute takes it alone; a share of no compute does not join a GPU whose compute is all taken.
Whole GPUs need an empty GPU anyway."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from runtimekit.model import MILLI, GpuKind, GpuRequest, NodeTable, Slot
from runtimekit.model.ledger import BoolArray, IntArray

Column = TypeVar("Column", IntArray, BoolArray)

REASON_NO_GPU = "no usable GPU"
REASON_CORE = "insufficient gpu-core"
REASON_MEMORY = "insufficient gpu-memory"
REASON_WHOLE = "too few whole free GPUs"
REASON_MODEL = "GPU model mismatch"
REASON_TOO_BIG = "gpu-memory request larger than the GPU"
REASON_SPLIT = "GPUs shared by their most pods (split count)"  # HAMi's CardTimeSlicingExhausted
REASON_ALONE = "GPUs in use: all of gpu-core takes a GPU alone"  # HAMi's ExclusiveDeviceAllocateConflict
REASON_NO_CORE = "no gpu-core left for a share without gpu-core"  # HAMi's CardComputeUnitsExhausted


def card_rules_on(req: GpuRequest, split: int) -> bool:
    """Whether the split-count rules (module docstring) can refuse a GPU this request fits by amounts."""
    return split > 1 and req.kind is GpuKind.SHARE


def card_blocks(holders: IntArray, core: IntArray, req: GpuRequest, split: int) -> tuple[BoolArray, BoolArray]:
    """Per GPU, under the split-count rules: no share slot left; and refused by a compute rule (a share
    of all compute on a GPU with any holder, a share of none on a GPU with no compute left)."""
    full: BoolArray = holders >= split
    if req.core_milli >= MILLI:
        return full, holders > 0
    if req.core_milli == 0:
        return full, core <= 0
    return full, np.zeros_like(full)


def memory_need(req: GpuRequest, total_mem: IntArray) -> IntArray | int:
    """MiB a share takes on GPUs of `total_mem` MiB: `GpuRequest.memory_on` over an array (an amount,
    a percent of the GPU's memory, or in proportion to the compute share)."""
    if req.memory_mib is not None:
        return req.memory_mib
    if req.memory_percent is not None:
        return (req.memory_percent * total_mem) // 100
    return (req.core_milli * total_mem) // MILLI


def memory_fits(req: GpuRequest, free_mem: IntArray, total_mem: IntArray) -> BoolArray:
    """`free_mem >= memory_need(req, total_mem)` without the division: for integers and d > 0,
    x >= (a * t) // d exactly when a * t <= d * x + d - 1 (an int64 division costs as much as the rest
    of the fit over all nodes)."""
    if req.memory_mib is not None:
        fits: BoolArray = free_mem >= req.memory_mib
    elif req.memory_percent is not None:
        fits = req.memory_percent * total_mem <= 100 * free_mem + 99
    else:
        fits = req.core_milli * total_mem <= MILLI * free_mem + (MILLI - 1)
    return fits


def per_gpu_at(table: NodeTable, column: Column, rows: IntArray) -> Column:
    """A per-GPU table column (rows × GPUs) at `rows`: a view when they are every row, else a copy
    by `take`, which numpy does several times faster than indexing a 2-D array by a row list."""
    if table.all_active(rows):
        return column[: rows.size]
    taken: Column = column.take(rows, axis=0)
    return taken


def count_per_row(mask: BoolArray) -> IntArray:
    """How many GPUs of each row a (rows × GPUs) mask marks. Eight GPUs a row (the common width) are
    eight bytes: counted as the set bits of one 64-bit word, as `sum(axis=1)` over eight columns costs
    ten times as much."""
    if mask.ndim == 2 and mask.shape[1] == 8 and mask.flags.c_contiguous:
        counts: IntArray = np.bitwise_count(mask.view(np.uint64).reshape(-1))
        return counts
    summed: IntArray = mask.sum(axis=1)
    return summed


def gpu_ok(table: NodeTable, rows: IntArray, req: GpuRequest, split: int = 0) -> tuple[BoolArray, BoolArray]:
    """Per (row, GPU): can this GPU hold one unit of the request; and is the memory the only problem
    (the split-count rules aside)."""
    usable = per_gpu_at(table, table.usable, rows)
    core = per_gpu_at(table, table.core_free, rows)
    free_mem = per_gpu_at(table, table.gmem_free, rows)
    total_mem = per_gpu_at(table, table.gmem_total, rows)
    if req.kind is GpuKind.WHOLE:
        core_ok = usable & (core == MILLI)
        mem_ok = free_mem == total_mem
    else:
        core_ok = usable & (core >= req.core_milli)
        mem_ok = memory_fits(req, free_mem, total_mem)
    if card_rules_on(req, split):
        full, refused = card_blocks(per_gpu_at(table, table.holders, rows), core, req, split)
        return core_ok & mem_ok & ~full & ~refused, core_ok & ~mem_ok
    return core_ok & mem_ok, core_ok & ~mem_ok


def summary_fit(req: GpuRequest, split: int = 0) -> bool:
    """Whether `fit_rows` reads the table's per-node summaries for this request (one comparison a
    row) rather than every GPU."""
    return req.kind is GpuKind.WHOLE or (req.count == 1 and req.memory_mib == 0 and not card_rules_on(req, split))


def fit_rows(
    table: NodeTable, rows: IntArray, req: GpuRequest, split: int = 0
) -> tuple[BoolArray, Callable[[], list[tuple[str, BoolArray]]]]:
    """Which rows have `req.count` GPUs that can each hold the request, and (lazily) why the rest
    do not. Whole GPUs and single shares without a memory request use the table's per-node
    summaries (`summary_fit`); other requests look at every GPU."""
    if req.kind is GpuKind.WHOLE:
        passed = table.at_rows(table.gpu_whole, rows) >= req.count
    elif req.count == 1 and req.memory_mib == 0 and not card_rules_on(req, split):
        passed = table.at_rows(table.gpu_max, rows) >= req.core_milli
    else:
        ok, _ = gpu_ok(table, rows, req, split)
        passed = count_per_row(ok) >= req.count
    return passed, lambda: explain_misfit(table, rows, req, split)


def explain_misfit(table: NodeTable, rows: IntArray, req: GpuRequest, split: int = 0) -> list[tuple[str, BoolArray]]:
    """Reasons, as masks over `rows`, why a request does not fit (see `fit_rows`), in HAMi's order
    where its rules apply: no share slot left first, then memory and compute, then the compute rules."""
    ok, mem_only = gpu_ok(table, rows, req)  # by free amounts alone
    counts = ok.sum(axis=1)
    amounts_failed = failed = counts < req.count
    any_usable = table.usable[rows].any(axis=1)
    reasons: list[tuple[str, BoolArray]] = []
    rule_reason: tuple[str, BoolArray] | None = None
    memory_blocked = (counts + mem_only.sum(axis=1)) >= req.count
    if card_rules_on(req, split):
        full, refused = card_blocks(table.holders[rows], table.core_free[rows], req, split)
        failed = (ok & ~full & ~refused).sum(axis=1) < req.count
        open_gpus = table.usable[rows] & ~full
        enough = open_gpus.sum(axis=1) >= req.count
        reasons.append((REASON_SPLIT, failed & (table.usable[rows].sum(axis=1) >= req.count) & ~enough))
        # HAMi checks memory before cores: memory short on too many of the open GPUs says so
        roomy = table.gmem_free[rows] >= memory_need(req, table.gmem_total[rows])
        memory_blocked = enough & ((open_gpus & roomy).sum(axis=1) < req.count)
        rule = REASON_ALONE if req.core_milli >= MILLI else REASON_NO_CORE if req.core_milli == 0 else REASON_SPLIT
        rule_reason = (rule, failed & ~amounts_failed)
    reasons.append((REASON_NO_GPU, failed & ~any_usable))
    if req.kind is GpuKind.SHARE and req.memory_mib is not None:
        too_big = (table.gmem_total[rows] < req.memory_mib).all(axis=1)
        reasons.append((REASON_TOO_BIG, amounts_failed & too_big))
    reasons.append((REASON_MEMORY, amounts_failed & memory_blocked))
    if rule_reason is not None:
        reasons.append(rule_reason)
    reasons.append((REASON_WHOLE if req.kind is GpuKind.WHOLE else REASON_CORE, failed))
    return reasons


def hopeless_rows(table: NodeTable, rows: IntArray, req: GpuRequest) -> BoolArray:
    """Rows where no eviction could ever make room: fewer usable GPUs (healthy, not in MIG mode)
    large enough for the request than it asks for (kube-scheduler's UnschedulableAndUnresolvable)."""
    usable = table.usable[rows]
    if req.kind is GpuKind.SHARE and req.memory_mib:
        usable = usable & (table.gmem_total[rows] >= req.memory_mib)
    hopeless: BoolArray = usable.sum(axis=1) < req.count
    return hopeless


def fitting_gpus(table: NodeTable, row: int, req: GpuRequest, split: int = 0) -> IntArray:
    """Columns of the GPUs of one row that can each hold one unit of the request."""
    # One row of a few GPUs: plain ints cost less than a chain of small numpy operations.
    count = int(table.gpu_count[row])  # the columns past it hold no GPU
    usable, core = table.usable[row, :count].tolist(), table.core_free[row, :count].tolist()
    gpus = range(count)
    if card_rules_on(req, split):
        full, refused = card_blocks(table.holders[row, :count], table.core_free[row, :count], req, split)
        usable = (np.array(usable, np.bool_) & ~full & ~refused).tolist()
    if req.kind is not GpuKind.WHOLE and req.memory_mib == 0:
        return np.array([c for c in gpus if usable[c] and core[c] >= req.core_milli], np.int64)
    free_mem, total_mem = table.gmem_free[row, :count].tolist(), table.gmem_total[row, :count].tolist()
    if req.kind is GpuKind.WHOLE:
        columns = [c for c in gpus if usable[c] and core[c] == MILLI and free_mem[c] == total_mem[c]]
    else:
        columns = [
            c for c in gpus if usable[c] and core[c] >= req.core_milli and free_mem[c] >= req.memory_on(total_mem[c])
        ]
    return np.array(columns, np.int64)


def slots_for(table: NodeTable, row: int, req: GpuRequest, columns: Sequence[int]) -> tuple[Slot, ...]:
    """The slots a request takes on the given GPU columns of a row."""
    out = []
    for col in columns:
        total = int(table.gmem_total[row, col])
        out.append(Slot(int(col), req.core_milli if req.kind is GpuKind.SHARE else MILLI, req.memory_on(total)))
    return tuple(out)


def sequential_fit(table: NodeTable, row: int, requests: Sequence[GpuRequest], split: int = 0) -> bool:
    """Whether several containers' requests fit one row together (first-fit, largest first)."""
    scratch = table.core_free[row].copy(), table.gmem_free[row].copy()
    holders = table.holders[row].copy()
    total = table.gmem_total[row]
    for req in sorted(requests, key=lambda r: -r.core_milli * r.count):
        core, mem = scratch
        usable = table.usable[row]
        if card_rules_on(req, split):
            full, refused = card_blocks(holders, core, req, split)
            usable = usable & ~full & ~refused
        if req.kind is GpuKind.WHOLE:
            ok = usable & (core == MILLI) & (mem == total)
            take_core, take_mem = np.full_like(core, MILLI), total
        else:
            need = memory_need(req, total)
            ok = usable & (core >= req.core_milli) & (mem >= need)
            take_core, take_mem = np.full_like(core, req.core_milli), need * np.ones_like(mem)
        cols = np.flatnonzero(ok)[: req.count]
        if cols.size < req.count:
            return False
        core[cols] -= take_core[cols]
        mem[cols] -= take_mem[cols]
        holders[cols] += 1
    return True
