"""The GPU ledger: per node, free CPU, memory and pod slots, and `gpuCount x {core milli, memory MiB}`.

`NodeTable` holds the numbers as numpy arrays (one row per node, one column per GPU) so that the
scheduler's filters and scores run over all nodes at once; it takes and gives back placements
atomically and never goes negative or above capacity. `Ledger` adds the bookings (which pod holds
which placement) and can be rebuilt from node inventories and pod assignments alone.

Callers: the scheduler cache and session (live and simulated), the tests. Not thread-safe: the
owner serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NewType

import numpy as np
import numpy.typing as npt

from runtimekit.model.assignment import Assignment, GpuShare
from runtimekit.model.gpu import Gpu, GpuUUID, MigMode, NodeInventory, NodeName
from runtimekit.model.migstate import MigGpuState
from runtimekit.model.scalars import Scalars, amount_of

PodKey = NewType("PodKey", str)
MILLI = 1000
NO_GPU = -1  # core_free of a column where the node has no GPU

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class LedgerError(Exception):
    """A placement the ledger refuses (it would go negative, over capacity, or names no GPU)."""


@dataclass(frozen=True)
class Slot:
    """A share of one GPU, or a MIG slice of it. `gpu` is the GPU's position in the node's inventory
    (its column). A MIG slot names the profile and the first memory slice of the instance."""

    gpu: int
    core_milli: int
    memory_mib: int
    mig_profile: str = ""
    mig_start: int = -1

    @property
    def is_mig(self) -> bool:
        return bool(self.mig_profile)


@dataclass(frozen=True)
class Placement:
    """Everything one pod takes on one node. Taken and given back as a unit."""

    node: NodeName
    cpu_milli: int = 0
    memory_mib: int = 0
    slots: tuple[Slot, ...] = ()
    scalars: Scalars = ()  # extended resources, storage and huge pages the pod takes

    @property
    def gpu_milli(self) -> int:
        return sum(s.core_milli for s in self.slots)


@dataclass(frozen=True)
class NodeCapacity:
    """What a node offers to pods besides GPUs (its allocatable)."""

    cpu_milli: int
    memory_mib: int
    pods: int = 110
    scalars: Scalars = ()  # allocatable extended resources, storage and huge pages


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
    _GPU_ARRAYS = ("core_free", "gmem_free", "gmem_total", "usable", "gpu_pods")

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
        cores, usables = self.core_free[row, :count].tolist(), self.usable[row, :count].tolist()
        gmems = self.gmem_free[row, :count].tolist()
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
            bool(self.active[row]),
            tuple(sorted((g, st.occupied) for g, st in mig.items())) if mig else (),
            tuple((n, int(self.scalar_free[n][row])) for n in sorted(self.scalar_free)) if self.scalar_free else (),
        )
        self.version[row] = hash(content) & 0x7FFF_FFFF_FFFF_FFFF
        total = usable_count = whole = room = 0
        most = NO_GPU
        gmem_totals = self.gmem_total[row, :count].tolist()
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
            capacity.memory_mib - used_mem,
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
        mig = self._mig_states(row, inventory)
        self.cpu_free[row], self.mem_free[row], self.pods_free[row] = checks
        self.cpu_total[row], self.mem_total[row] = capacity.cpu_milli, capacity.memory_mib
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

    def _mig_states(self, row: int, inventory: NodeInventory) -> dict[int, MigGpuState]:
        """MIG states for the GPUs in MIG mode, keeping the slices booked on GPUs that did not change
        mode or model. Raises LedgerError when booked slices would be lost."""
        old = self.mig.get(row, {})
        states: dict[int, MigGpuState] = {}
        for col, gpu in enumerate(inventory.gpus):
            state = MigGpuState.of(gpu)
            previous = old.get(col)
            if previous is not None and previous.occupied:
                if state is None or state.geometry != previous.geometry or state.mode is not previous.mode:
                    raise LedgerError(f"node {inventory.node!r}: GPU {col} changed MIG mode with slices booked")
                state.occupied = previous.occupied
            if state is not None:
                states[col] = state
        for col, previous in old.items():
            if col >= len(inventory.gpus) and previous.occupied:
                raise LedgerError(f"node {inventory.node!r}: GPU {col} is gone with MIG slices booked")
        return states

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
            old_cap.memory_mib - int(self.mem_free[row]),
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
        self.mig.pop(row, None)
        for column in self.scalar_free.values():
            column[row] = 0
        self._bump(row)

    # -- placements ------------------------------------------------------------------------
    def _per_gpu(self, placement: Placement, row: int) -> dict[int, list[int]]:
        """Core and memory per GPU column of a placement; raises LedgerError for a malformed slot."""
        per: dict[int, list[int]] = {}
        count = int(self.gpu_count[row])
        for slot in placement.slots:
            if not 0 <= slot.gpu < count:
                raise LedgerError(f"node {placement.node!r} has no GPU at position {slot.gpu}")
            if slot.is_mig:
                continue  # MIG slices are booked in `mig`, not in the share arrays
            if slot.core_milli < 0 or slot.memory_mib < 0:
                raise LedgerError("a slot's core and memory must not be negative")
            if slot.core_milli > MILLI:
                raise LedgerError(f"a slot asks {slot.core_milli} milli, more than one GPU")
            amounts = per.setdefault(slot.gpu, [0, 0])
            amounts[0] += slot.core_milli
            amounts[1] += slot.memory_mib
        return per

    def _problem(self, placement: Placement, row: int, per: dict[int, list[int]], allow_unusable: bool) -> str | None:
        if min(placement.cpu_milli, placement.memory_mib) < 0:
            return "cpu and memory must not be negative"
        if placement.cpu_milli > self.cpu_free[row]:
            return f"insufficient cpu on {placement.node}"
        if placement.memory_mib > self.mem_free[row]:
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
        return self._mig_problem(placement, row)

    def _mig_problem(self, placement: Placement, row: int) -> str | None:
        migs = [s for s in placement.slots if s.is_mig]
        if not migs:
            return None
        states = {g: st.copy() for g, st in self.mig.get(row, {}).items()}
        for slot in migs:
            state = states.get(slot.gpu)
            if state is None:
                return f"GPU {slot.gpu} of {placement.node} is not in MIG mode"
            problem = state.check(slot.mig_profile, slot.mig_start)
            if problem:
                return f"GPU {slot.gpu} of {placement.node}: {problem}"
            state.take(slot.mig_profile, slot.mig_start)
        return None

    def check(self, placement: Placement, allow_unusable: bool = False) -> str | None:
        """Why `placement` cannot be taken now, or None when it can."""
        row = self._rows.get(placement.node)
        if row is None:
            return f"unknown node {placement.node!r}"
        try:
            per = self._per_gpu(placement, row)
        except LedgerError as exc:
            return str(exc)
        return self._problem(placement, row, per, allow_unusable)

    def take(self, placement: Placement, allow_unusable: bool = False) -> None:
        """Deduct a placement, all of it or nothing. Raises LedgerError with the reason."""
        row = self._rows.get(placement.node)
        if row is None:
            raise LedgerError(f"unknown node {placement.node!r}")
        per = self._per_gpu(placement, row)
        problem = self._problem(placement, row, per, allow_unusable)
        if problem:
            raise LedgerError(problem)
        self.cpu_free[row] -= placement.cpu_milli
        self.mem_free[row] -= placement.memory_mib
        self.pods_free[row] -= 1
        for name, amount in placement.scalars:
            self.scalar_free[name][row] -= amount
        for gpu, (core, mem) in per.items():
            self.core_free[row, gpu] -= core
            self.gmem_free[row, gpu] -= mem
        for slot in placement.slots:
            if slot.is_mig:
                self.mig[row][slot.gpu].take(slot.mig_profile, slot.mig_start)
        if placement.slots:
            self.gpu_pods[row, self._tag(placement, row)] += 1
        self._bump(row)

    def give(self, placement: Placement) -> None:
        """Return a placement taken before. Raises LedgerError if it would exceed capacity."""
        row = self.row(placement.node)
        per = self._per_gpu(placement, row)
        cap = self._capacity[placement.node]
        over = (
            self.cpu_free[row] + placement.cpu_milli > cap.cpu_milli
            or self.mem_free[row] + placement.memory_mib > cap.memory_mib
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
        self.mem_free[row] += placement.memory_mib
        self.pods_free[row] += 1
        for name, amount in placement.scalars:
            self._scalar_column(name)[row] += amount
        for gpu, (core, mem) in per.items():
            self.core_free[row, gpu] += core
            self.gmem_free[row, gpu] += mem
        for slot in placement.slots:
            state = self.mig.get(row, {}).get(slot.gpu) if slot.is_mig else None
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


class Ledger:
    """A NodeTable plus the bookings: which pod holds which placement."""

    def __init__(self, table: NodeTable | None = None) -> None:
        self.table = table if table is not None else NodeTable()
        self._bookings: dict[PodKey, Placement] = {}
        self._by_node: dict[NodeName, set[PodKey]] = {}

    def booking(self, pod: PodKey) -> Placement | None:
        return self._bookings.get(pod)

    def bookings(self) -> Mapping[PodKey, Placement]:
        return self._bookings

    def pods_on(self, node: str) -> set[PodKey]:
        return set(self._by_node.get(NodeName(node), ()))

    def reserve(self, pod: PodKey, placement: Placement, allow_unusable: bool = False) -> None:
        """Book a placement for a pod. Booking the identical placement again is a no-op;
        a different one for a booked pod is an error (release it first)."""
        held = self._bookings.get(pod)
        if held is not None:
            if held == placement:
                return
            raise LedgerError(f"pod {pod} already holds a placement on {held.node}")
        self.table.take(placement, allow_unusable)
        self._bookings[pod] = placement
        self._by_node.setdefault(placement.node, set()).add(pod)

    def record(self, pod: PodKey, placement: Placement) -> None:
        """Book a placement whose resources the caller has already taken from `table`."""
        if pod in self._bookings:
            raise LedgerError(f"pod {pod} already holds a placement on {self._bookings[pod].node}")
        self._bookings[pod] = placement
        self._by_node.setdefault(placement.node, set()).add(pod)

    def forget(self, pod: PodKey) -> Placement | None:
        """Drop a booking whose resources the caller has already given back to `table`."""
        placement = self._bookings.pop(pod, None)
        if placement is not None:
            self._by_node.get(placement.node, set()).discard(pod)
        return placement

    def release(self, pod: PodKey) -> Placement | None:
        """Give back what a pod holds. Idempotent: releasing an unknown pod returns None."""
        placement = self._bookings.pop(pod, None)
        if placement is None:
            return None
        self._by_node.get(placement.node, set()).discard(pod)
        if self.table.has_node(placement.node):
            self.table.give(placement)
        return placement

    def set_node(self, inventory: NodeInventory, capacity: NodeCapacity) -> list[tuple[PodKey, str]]:
        """Add or update a node. Bookings that no longer fit are dropped and returned with why."""
        count = len(inventory.gpus)
        booked = self._by_node.get(inventory.node, set())
        # a slot of nothing on a GPU that is gone takes no capacity, so only its position gives it away
        if not any(slot.gpu >= count for pod in booked for slot in self._bookings[pod].slots):
            try:
                self.table.set_node(inventory, capacity)
                return []
            except LedgerError:
                pass
        held = {pod: self._bookings[pod] for pod in sorted(booked)}
        for pod in held:
            self.release(pod)
        self.table.set_node(inventory, capacity)
        dropped: list[tuple[PodKey, str]] = []
        for pod, placement in held.items():
            problem = self.table.check(placement, allow_unusable=True)
            if problem:
                dropped.append((pod, problem))
            else:
                self.reserve(pod, placement, allow_unusable=True)
        return dropped

    def remove_node(self, node: str) -> list[PodKey]:
        """Remove a node; its bookings are dropped and returned."""
        pods = sorted(self._by_node.pop(NodeName(node), set()))
        for pod in pods:
            self._bookings.pop(pod, None)
        if self.table.has_node(node):
            self.table.remove_node(node)
        return pods

    @classmethod
    def rebuild(
        cls,
        nodes: Iterable[tuple[NodeInventory, NodeCapacity]],
        pods: Iterable[tuple[PodKey, Placement]],
    ) -> tuple[Ledger, list[tuple[PodKey, str]]]:
        """A ledger from node inventories and pod placements alone, in the order given.

        A placement that does not fit (it would over-commit, or names a missing node or GPU) is not
        booked; it is returned with the reason so the caller can report it.
        """
        ledger = cls()
        for inventory, capacity in nodes:
            ledger.table.set_node(inventory, capacity)
        conflicts: list[tuple[PodKey, str]] = []
        for pod, placement in pods:
            try:
                ledger.reserve(pod, placement, allow_unusable=True)
            except LedgerError as exc:
                conflicts.append((pod, str(exc)))
        return ledger, conflicts


def placement_from_assignment(
    assignment: Assignment, inventory: NodeInventory, cpu_milli: int = 0, memory_mib: int = 0
) -> Placement:
    """The ledger placement of an assignment; raises LedgerError for a GPU the node lacks."""
    positions = {gpu.uuid: i for i, gpu in enumerate(inventory.gpus)}
    slots = []
    for share in assignment.shares():
        uuid = share.parent_uuid or share.uuid
        if uuid not in positions:
            raise LedgerError(f"node {inventory.node!r} has no GPU {uuid}")
        slots.append(Slot(positions[uuid], share.core_milli, share.memory_mib, share.mig_profile, share.mig_start))
    return Placement(assignment.node, cpu_milli, memory_mib, tuple(slots))


def shares_for(placement_slots: Iterable[Slot], inventory: NodeInventory) -> tuple[GpuShare, ...]:
    """Assignment shares (with UUIDs and indexes) for slots on a node. A MIG slot names its GPU as
    the parent; its own UUID is the existing instance's (static mode) or empty until the runtime
    creates it (dynamic mode)."""
    out = []
    for slot in placement_slots:
        gpu = inventory.gpus[slot.gpu]
        if slot.is_mig:
            existing = next(
                (d.uuid for d in gpu.mig_devices if d.start == slot.mig_start and d.profile == slot.mig_profile), ""
            )
            out.append(
                GpuShare(GpuUUID(existing), gpu.index, 0, slot.memory_mib, slot.mig_profile, gpu.uuid, slot.mig_start)
            )
        else:
            out.append(GpuShare(gpu.uuid, gpu.index, slot.core_milli, slot.memory_mib))
    return tuple(out)
