"""The node table: per node, free CPU, memory (bytes), pod slots and scalar resources, and
`gpuCount x {core milli, memory MiB}`, as numpy arrays (one row per node, one column per GPU) so
that the scheduler's filters and scores run over all nodes at once. It takes and gives back
placements atomically and never goes negative or above capacity; `Ledger` (ledger.py) adds which
pod holds which placement.

Callers: the ledger, the scheduler's session and plugins (live and simulated), the tests. Not
thread-safe: the owner serialises access.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from runtimekit.model.gpu import Gpu, MigMode, NodeInventory, NodeName
from runtimekit.model.migstate import MigGpuState, carry_over, mig_problem
from runtimekit.model.placement import (
    MILLI,
    NO_GPU,
    BoolArray,
    IntArray,
    LedgerError,
    NodeCapacity,
    Placement,
    per_gpu,
)
from runtimekit.model.scalars import amount_of


class NodeTable:
    """Free and total resources of every node as arrays; see the module docstring."""

    def __init__(self, width: int = 8) -> None:
        self._rows: dict[NodeName, int] = {}
        self._names: list[NodeName | None] = []
        self._inventories: dict[NodeName, NodeInventory] = {}
        self._capacity: dict[NodeName, NodeCapacity] = {}
        self._free_rows: list[int] = []
        self._shared_maps = False
        self._active_rows: IntArray | None = None
        self._every_row: IntArray | None = None  # _active_rows when that is every row 0..rows-1
        self.mig: dict[int, dict[int, MigGpuState]] = {}  # row -> GPU column -> MIG state (GPUs in MIG mode)
        # free amount per row of each scalar resource some node offers (absent: no node offers it)
        self.scalar_free: dict[str, IntArray] = {}
        self._alloc(0, width)

    # -- storage ---------------------------------------------------------------------------
    def _alloc(self, rows: int, width: int) -> None:
        self.cpu_free: IntArray = np.zeros(rows, np.int64)
        self.mem_free: IntArray = np.zeros(rows, np.int64)
        self.cpu_total: IntArray = np.zeros(rows, np.int64)
        self.mem_total: IntArray = np.zeros(rows, np.int64)
        self.pods_free: IntArray = np.zeros(rows, np.int64)
        self.core_free: IntArray = np.full((rows, width), NO_GPU, np.int64)
        self.gmem_free: IntArray = np.zeros((rows, width), np.int64)
        self.gmem_total: IntArray = np.zeros((rows, width), np.int64)
        self.usable: BoolArray = np.zeros((rows, width), np.bool_)
        self.gpu_count: IntArray = np.zeros(rows, np.int64)
        self.active: BoolArray = np.zeros(rows, np.bool_)
        self.version: IntArray = np.zeros(rows, np.int64)
        # GPU pods per node by class: column 0 share pods, column k pods holding k whole GPUs.
        self.gpu_pods: IntArray = np.zeros((rows, width + 1), np.int64)
        # Shares held per GPU (a container's slot on it, whatever its size): what a split count caps,
        # as HAMi counts a card's users (`DeviceUsage.Used`) against its `deviceSplitCount`.
        self.holders: IntArray = np.zeros((rows, width), np.int64)
        # Per-node summaries over usable GPUs, kept current so that common checks stay 1-D:
        self.gpu_sum: IntArray = np.zeros(rows, np.int64)  # total free core milli
        self.gpu_max: IntArray = np.full(rows, NO_GPU, np.int64)  # the most free core milli on one GPU
        self.gpu_whole: IntArray = np.zeros(rows, np.int64)  # GPUs entirely free (core and memory)
        self.gpu_room: IntArray = np.zeros(rows, np.int64)  # GPUs with any free core milli
        self.gpu_usable: IntArray = np.zeros(rows, np.int64)  # usable GPUs
        self.cpu_room: IntArray = np.full(rows, -1, np.int64)  # cpu_free, or -1 with no pod slot left

    _ROW_ARRAYS = (
        "cpu_free",
        "mem_free",
        "pods_free",
        "cpu_total",
        "mem_total",
        "gpu_count",
        "active",
        "version",
        "gpu_sum",
        "gpu_max",
        "gpu_whole",
        "gpu_room",
        "gpu_usable",
        "cpu_room",
    )
    _GPU_ARRAYS = ("core_free", "gmem_free", "gmem_total", "usable", "gpu_pods", "holders")

    def _grow(self, rows: int, width: int) -> None:
        old_rows, old_width = self.core_free.shape
        rows, width = max(rows, old_rows), max(width, old_width)
        if (rows, width) == (old_rows, old_width):
            return
        for name in self._ROW_ARRAYS:
            old = getattr(self, name)
            new = np.full(rows, -1 if name in ("gpu_max", "cpu_room") else 0, old.dtype)
            new[:old_rows] = old
            setattr(self, name, new)
        for name in self._GPU_ARRAYS:
            old = getattr(self, name)
            extra = 1 if name == "gpu_pods" else 0
            new = np.full((rows, width + extra), NO_GPU if name == "core_free" else 0, old.dtype)
            new[:old_rows, : old_width + extra] = old
            setattr(self, name, new)
        for name, column in self.scalar_free.items():
            grown = np.zeros(rows, np.int64)
            grown[:old_rows] = column
            self.scalar_free[name] = grown

    def _scalar_column(self, name: str) -> IntArray:
        column = self.scalar_free.get(name)
        if column is None:
            column = self.scalar_free[name] = np.zeros(self.core_free.shape[0], np.int64)
        return column

    def _own_maps(self) -> None:
        if self._shared_maps:
            self._rows = dict(self._rows)
            self._names = list(self._names)
            self._inventories = dict(self._inventories)
            self._capacity = dict(self._capacity)
            self._free_rows = list(self._free_rows)
            self._shared_maps = False

    def copy(self) -> NodeTable:
        """A snapshot: arrays are copied, node maps are shared until either side adds a node."""
        other = NodeTable.__new__(NodeTable)
        for name in self._ROW_ARRAYS + self._GPU_ARRAYS:
            setattr(other, name, getattr(self, name).copy())
        other._rows, other._names = self._rows, self._names
        other._inventories, other._capacity = self._inventories, self._capacity
        other._free_rows = self._free_rows
        other._active_rows, other._every_row = self._active_rows, self._every_row
        other.mig = {row: {g: st.copy() for g, st in gpus.items()} for row, gpus in self.mig.items()}
        other.scalar_free = {name: column.copy() for name, column in self.scalar_free.items()}
        self._shared_maps = other._shared_maps = True
        return other

    def active_rows(self) -> IntArray:
        """Rows that hold a node, ascending (cached until a node is added or removed). Do not modify."""
        if self._active_rows is None:
            self._active_rows = np.flatnonzero(self.active[: self.rows])
            self._active_rows.setflags(write=False)
            self._every_row = self._active_rows if self._active_rows.size == self.rows else None
        return self._active_rows

    def keep(self, rows: IntArray, passed: BoolArray) -> IntArray:
        """`rows[passed]`: the rows of `rows` where `passed` (a mask over them) holds. Read from the
        mask alone when `rows` is every row (the usual first filter), which costs less."""
        if self.all_active(rows):
            kept: IntArray = passed.nonzero()[0]
            return kept
        return rows[passed]

    def all_active(self, rows: IntArray) -> bool:
        """True when `rows` is exactly every row 0..rows-1 (so views can replace gathers)."""
        return rows is self._every_row

    def at_rows(self, column: IntArray, rows: IntArray) -> IntArray:
        """A per-row array (`cpu_free`, `gpu_max`, ...) at `rows`: a view when they are every row,
        else a gathered copy. Do not modify."""
        return column[: rows.size] if self.all_active(rows) else column[rows]

    # -- nodes -----------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return len(self._names)

    @property
    def width(self) -> int:
        return int(self.core_free.shape[1])

    def names(self) -> list[NodeName | None]:
        """Node name per row (None for a free row). Do not modify."""
        return self._names

    def node_names(self) -> list[NodeName]:
        return list(self._rows)

    def row(self, node: str) -> int:
        try:
            return self._rows[NodeName(node)]
        except KeyError:
            raise LedgerError(f"unknown node {node!r}") from None

    def model_at(self, row: int) -> str:
        """The GPU model of the node in a row ("" for a free row or a node without GPUs)."""
        name = self._names[row] if row < len(self._names) else None
        inventory = self._inventories.get(name) if name is not None else None
        return inventory.model if inventory is not None else ""

    def has_node(self, node: str) -> bool:
        return node in self._rows

    def inventory(self, node: str) -> NodeInventory:
        self.row(node)
        return self._inventories[NodeName(node)]

    def capacity(self, node: str) -> NodeCapacity:
        self.row(node)
        return self._capacity[NodeName(node)]

    def _bump(self, row: int) -> None:
        """Record a change of a row: fresh summaries and a new version.

        The version is a hash of the row's content (and its node's GPU model), so two tables that
        reached the same state — a session's copy and the cache it commits to — agree on it, and
        caches keyed by version (FGD's scores) stay valid across snapshots."""
        # In plain ints, read once: this runs on every booking, twice per decision. Columns past the
        # node's GPU count always hold the same (no GPU), so the count stands for them.
        count = int(self.gpu_count[row])
        cores: list[int] = []
        usables: list[bool] = []
        gmems: list[int] = []
        holders: list[int] = []
        gmem_totals: list[int] = []
        if count:  # a node without GPUs (most of kube-scheduler's workloads) slices nothing
            cores, usables = self.core_free[row, :count].tolist(), self.usable[row, :count].tolist()
            gmems = self.gmem_free[row, :count].tolist()
            holders = self.holders[row, :count].tolist()
            gmem_totals = self.gmem_total[row, :count].tolist()
        cpu, pods = int(self.cpu_free[row]), int(self.pods_free[row])
        name = self._names[row] if row < len(self._names) else None
        mig = self.mig.get(row)
        content = (
            self.model_at(row),
            name,
            cpu,
            int(self.mem_free[row]),
            pods,
            count,
            tuple(cores),
            tuple(gmems),
            tuple(usables),
            tuple(holders),
            bool(self.active[row]),
            tuple(sorted((g, st.occupied) for g, st in mig.items())) if mig else (),
            tuple((n, int(self.scalar_free[n][row])) for n in sorted(self.scalar_free)) if self.scalar_free else (),
        )
        self.version[row] = hash(content) & 0x7FFF_FFFF_FFFF_FFFF
        total = usable_count = whole = room = 0
        most = NO_GPU
        for core, usable, gmem, gmem_total in zip(cores, usables, gmems, gmem_totals, strict=True):
            if usable:
                total += core
                usable_count += 1
                most = max(most, core)
                if core > 0:
                    room += 1
                    if core == MILLI and gmem == gmem_total:
                        whole += 1
        self.gpu_sum[row], self.gpu_max[row] = total, most
        self.gpu_whole[row], self.gpu_usable[row], self.gpu_room[row] = whole, usable_count, room
        self.cpu_room[row] = cpu if pods > 0 else -1

    def add_node(self, inventory: NodeInventory, capacity: NodeCapacity) -> int:
        """Add an empty node. Adding a node that exists is an error (use `set_node`)."""
        if inventory.node in self._rows:
            raise LedgerError(f"node {inventory.node!r} already exists")
        self._own_maps()
        if self._free_rows:
            row = self._free_rows.pop()
            self._names[row] = inventory.node
        else:
            row = len(self._names)
            self._names.append(inventory.node)
        self._grow(
            max(row + 1, 2 * self.core_free.shape[0]) if row >= self.core_free.shape[0] else 0, len(inventory.gpus)
        )
        self._rows[inventory.node] = row
        self._active_rows = self._every_row = None
        self._write_node(row, inventory, capacity, used=None)
        return row

    def _write_node(
        self,
        row: int,
        inventory: NodeInventory,
        capacity: NodeCapacity,
        used: tuple[int, int, int, IntArray, IntArray] | None,
        used_scalars: Mapping[str, int] | None = None,
    ) -> None:
        width = self.width
        count = len(inventory.gpus)
        cap_core = np.full(width, NO_GPU, np.int64)
        cap_core[:count] = MILLI
        cap_mem = np.zeros(width, np.int64)
        cap_mem[:count] = [g.memory_mib for g in inventory.gpus]
        usable = np.zeros(width, np.bool_)
        usable[:count] = [_shareable(g) for g in inventory.gpus]
        used_cpu, used_mem, used_pods, used_core, used_gmem = used or (
            0,
            0,
            0,
            np.zeros(width, np.int64),
            np.zeros(width, np.int64),
        )
        free_core = np.where(cap_core >= 0, cap_core - used_core, NO_GPU)
        free_gmem = cap_mem - used_gmem
        checks = (
            capacity.cpu_milli - used_cpu,
            capacity.memory_bytes - used_mem,
            capacity.pods - used_pods,
        )
        used_scalars = used_scalars or {}
        scalar_free = {name: amount_of(capacity.scalars, name) - used_scalars.get(name, 0) for name in self.scalar_free}
        scalar_free.update({name: amount - used_scalars.get(name, 0) for name, amount in capacity.scalars})
        low = any(v < 0 for v in scalar_free.values())
        if min(checks) < 0 or low or (free_core[:count] < 0).any() or (free_gmem < 0).any() or used_core[count:].any():
            raise LedgerError(f"node {inventory.node!r}: new capacity is below what is booked on it")
        for name, free in scalar_free.items():
            self._scalar_column(name)[row] = free
        mig = carry_over(self.mig.get(row, {}), inventory)
        self.cpu_free[row], self.mem_free[row], self.pods_free[row] = checks
        self.cpu_total[row], self.mem_total[row] = capacity.cpu_milli, capacity.memory_bytes
        self.core_free[row], self.gmem_free[row], self.gmem_total[row], self.usable[row] = (
            free_core,
            free_gmem,
            cap_mem,
            usable,
        )
        self.gpu_count[row] = count
        self.active[row] = True
        if mig:
            self.mig[row] = mig
        else:
            self.mig.pop(row, None)
        self._inventories[inventory.node] = inventory
        self._capacity[inventory.node] = capacity
        self._bump(row)

    def set_node(self, inventory: NodeInventory, capacity: NodeCapacity) -> int:
        """Add a node or change its inventory/capacity keeping what is booked on it.

        Raises LedgerError (and changes nothing) when the new capacity is below what is booked.
        """
        if inventory.node not in self._rows:
            return self.add_node(inventory, capacity)
        self._own_maps()
        row = self._rows[inventory.node]
        self._grow(0, len(inventory.gpus))
        old_cap = self._capacity[inventory.node]
        count = int(self.gpu_count[row])
        used_core = np.zeros(self.width, np.int64)
        used_core[:count] = MILLI - self.core_free[row, :count]
        used_gmem = self.gmem_total[row] - self.gmem_free[row]
        used = (
            old_cap.cpu_milli - int(self.cpu_free[row]),
            old_cap.memory_bytes - int(self.mem_free[row]),
            old_cap.pods - int(self.pods_free[row]),
            used_core,
            used_gmem,
        )
        used_scalars = {name: amount - int(self.scalar_free[name][row]) for name, amount in old_cap.scalars}
        self._write_node(row, inventory, capacity, used, used_scalars)
        return row

    def remove_node(self, node: str) -> None:
        row = self.row(node)
        self._own_maps()
        del self._rows[NodeName(node)]
        del self._inventories[NodeName(node)]
        del self._capacity[NodeName(node)]
        self._names[row] = None
        self._free_rows.append(row)
        self._active_rows = self._every_row = None
        self.active[row] = False
        self.cpu_free[row] = self.mem_free[row] = self.pods_free[row] = 0
        self.cpu_total[row] = self.mem_total[row] = 0
        self.core_free[row] = NO_GPU
        self.gmem_free[row] = self.gmem_total[row] = 0
        self.usable[row] = False
        self.gpu_count[row] = 0
        self.gpu_pods[row] = 0
        self.holders[row] = 0
        self.mig.pop(row, None)
        for column in self.scalar_free.values():
            column[row] = 0
        self._bump(row)

    # -- placements ------------------------------------------------------------------------
    def _problem(self, placement: Placement, row: int, per: dict[int, list[int]], allow_unusable: bool) -> str | None:
        if min(placement.cpu_milli, placement.memory_bytes) < 0:
            return "cpu and memory must not be negative"
        if placement.cpu_milli > self.cpu_free[row]:
            return f"insufficient cpu on {placement.node}"
        if placement.memory_bytes > self.mem_free[row]:
            return f"insufficient memory on {placement.node}"
        if self.pods_free[row] < 1:
            return f"too many pods on {placement.node}"
        for name, amount in placement.scalars:
            column = self.scalar_free.get(name)
            if amount < 0:
                return f"{name} must not be negative"
            if amount > (int(column[row]) if column is not None else 0):
                return f"insufficient {name} on {placement.node}"
        for gpu, (core, mem) in per.items():
            if not (core or mem):
                continue
            if not allow_unusable and not self.usable[row, gpu]:
                return f"GPU {gpu} of {placement.node} is unhealthy or not shareable"
            if mem > self.gmem_total[row, gpu]:
                return f"asks {mem} MiB on a {int(self.gmem_total[row, gpu])} MiB GPU"
            if core > self.core_free[row, gpu] or mem > self.gmem_free[row, gpu]:
                return f"insufficient GPU share on GPU {gpu} of {placement.node}"
        return mig_problem(self.mig.get(row, {}), placement)

    def check(self, placement: Placement, allow_unusable: bool = False) -> str | None:
        """Why `placement` cannot be taken now, or None when it can."""
        row = self._rows.get(placement.node)
        if row is None:
            return f"unknown node {placement.node!r}"
        try:
            per = per_gpu(placement, int(self.gpu_count[row]))
        except LedgerError as exc:
            return str(exc)
        return self._problem(placement, row, per, allow_unusable)

    def take(self, placement: Placement, allow_unusable: bool = False) -> None:
        """Deduct a placement, all of it or nothing. Raises LedgerError with the reason."""
        row = self._rows.get(placement.node)
        if row is None:
            raise LedgerError(f"unknown node {placement.node!r}")
        per = per_gpu(placement, int(self.gpu_count[row]))
        problem = self._problem(placement, row, per, allow_unusable)
        if problem:
            raise LedgerError(problem)
        self.cpu_free[row] -= placement.cpu_milli
        self.mem_free[row] -= placement.memory_bytes
        self.pods_free[row] -= 1
        for name, amount in placement.scalars:
            self.scalar_free[name][row] -= amount
        for gpu, (core, mem) in per.items():
            self.core_free[row, gpu] -= core
            self.gmem_free[row, gpu] -= mem
        for slot in placement.slots:
            if slot.is_mig:
                self.mig[row][slot.gpu].take(slot.mig_profile, slot.mig_start)
            else:
                self.holders[row, slot.gpu] += 1
        if placement.slots:
            self.gpu_pods[row, self._tag(placement, row)] += 1
        self._bump(row)

    def give(self, placement: Placement) -> None:
        """Return a placement taken before. Raises LedgerError if it would exceed capacity."""
        row = self.row(placement.node)
        per = per_gpu(placement, int(self.gpu_count[row]))
        cap = self._capacity[placement.node]
        over = (
            self.cpu_free[row] + placement.cpu_milli > cap.cpu_milli
            or self.mem_free[row] + placement.memory_bytes > cap.memory_bytes
            or self.pods_free[row] + 1 > cap.pods
            or any(self._scalar_back(row, n) + amount > amount_of(cap.scalars, n) for n, amount in placement.scalars)
            or any(
                self.core_free[row, g] + c > MILLI or self.gmem_free[row, g] + m > self.gmem_total[row, g]
                for g, (c, m) in per.items()
            )
        )
        if over:
            raise LedgerError(f"giving back this placement would exceed the capacity of {placement.node}")
        self.cpu_free[row] += placement.cpu_milli
        self.mem_free[row] += placement.memory_bytes
        self.pods_free[row] += 1
        for name, amount in placement.scalars:
            self._scalar_column(name)[row] += amount
        for gpu, (core, mem) in per.items():
            self.core_free[row, gpu] += core
            self.gmem_free[row, gpu] += mem
        for slot in placement.slots:
            if not slot.is_mig:
                self.holders[row, slot.gpu] = max(0, int(self.holders[row, slot.gpu]) - 1)
                continue
            state = self.mig.get(row, {}).get(slot.gpu)
            if state is not None:
                state.give(slot.mig_profile, slot.mig_start)
        if placement.slots:
            tag = self._tag(placement, row)
            self.gpu_pods[row, tag] = max(0, int(self.gpu_pods[row, tag]) - 1)
        self._bump(row)

    def _scalar_back(self, row: int, name: str) -> int:
        column = self.scalar_free.get(name)
        return int(column[row]) if column is not None else 0

    def _tag(self, placement: Placement, row: int) -> int:
        """The GPU-pod class of a placement: k for k whole GPUs, else 0 (a share pod)."""
        if len(placement.slots) == 1:  # the usual case, without the generators below
            only = placement.slots[0]
            whole_one = only.core_milli == MILLI and only.memory_mib == self.gmem_total[row, only.gpu]
            return 1 if whole_one and not only.is_mig else 0
        if any(s.is_mig for s in placement.slots):
            return 0
        gpus = [s.gpu for s in placement.slots]
        whole = len(set(gpus)) == len(gpus) and all(
            s.core_milli == MILLI and s.memory_mib == self.gmem_total[row, s.gpu] for s in placement.slots
        )
        return min(len(gpus), self.width) if whole else 0

    def free_gpus(self, node: str) -> list[tuple[int, int]]:
        """(free core milli, free memory MiB) per GPU of a node, in inventory order."""
        row = self.row(node)
        count = int(self.gpu_count[row])
        return [(int(c), int(m)) for c, m in zip(self.core_free[row, :count], self.gmem_free[row, :count], strict=True)]


def _shareable(gpu: Gpu) -> bool:
    return gpu.healthy and gpu.mig_mode is MigMode.OFF
