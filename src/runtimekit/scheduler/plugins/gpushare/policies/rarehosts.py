"""Keeping the hosts of rare whole-GPU pods for them (packfrag, design item 7 of
docs/results/better-than-fgd.md).

A whole-GPU type is rare when at most one in `RARE_HOSTS` of the nodes with its GPU count can host
it (on openb: 8 GPUs and 120 cores, which only the 39 G3 nodes of 617 have). packfrag's usable
capacity weighs a type by its share of pods, so a type of 5 pods in 10,000 weighs a few milli in a
loss scored in steps of about 40 milli: nothing keeps its hosts free, and CPU-rich nodes are where
taking CPU costs the least. Here a placement that would leave a host unable to take such a pod
(too few fully free GPUs, too little CPU, or less memory than the least such a pod has asked) is
marked, and loses `HOST_PENALTY` points: the pod goes there only when no other node can take it.

Before any such pod has been seen, the nodes kept are those whose whole-node capacity few nodes
match (`rare_nodes`), all of them. Once a rare type is in the learned workload, a reserve of its
hosts is kept: `RESERVE` times the pods of it expected while the free GPUs last, plus two; it
shrinks as the cluster fills, so at full load the hosts' GPUs go to whatever arrives.
Callers: policies/packfrag.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from runtimekit.model import MILLI, NodeTable
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.plugins.gpushare.policies.base import PodShape

RARE_HOSTS = 4.0  # a whole-GPU type is rare when at most 1 in this many nodes with its GPUs can host it
RESERVE = 3.0  # hosts of a rare type kept per such pod expected before the free GPUs run out
HOST_PENALTY = 100  # score points a placement loses for spoiling a host of a rare type
UNSEEN = 1 << 40  # the reserve before a rare type has been seen: every host


def rare_types(
    whole_any_model: npt.NDArray[np.bool_],
    count: IntArray,
    cpu: IntArray,
    rarity: npt.NDArray[np.float64],
    probabilities: Sequence[float] | npt.NDArray[np.float64],
    table: NodeTable,
) -> tuple[list[tuple[int, int]], dict[int, float]]:
    """Per GPU count, the least CPU a rare type of it asks, and the learned share of pods of those
    types (per type of the workload: whole GPUs and any model allowed, its GPU count, its CPU, and
    its host rarity); for a GPU count no rare type has, the nodes few others match, with no share."""
    least: dict[int, int] = {}
    share: dict[int, float] = {}
    rare = whole_any_model & (rarity >= RARE_HOSTS)
    for i in np.flatnonzero(rare).tolist():
        k = int(count[i])
        least[k] = min(least.get(k, UNSEEN), int(cpu[i]))
        share[k] = share.get(k, 0.0) + float(probabilities[i])
    for k, need in rare_nodes(table):
        least.setdefault(k, need)
    return sorted(least.items()), share


def rare_nodes(table: NodeTable) -> list[tuple[int, int]]:
    """(GPUs k, CPU) for nodes whose whole-node capacity few nodes match, before any pod that needs
    it has been seen: the nodes with k GPUs and more CPU than any node outside them with at least k
    GPUs, when they are at most 1 in `RARE_HOSTS` of the nodes with at least k GPUs and all have
    exactly k. On openb: the 39 G3 nodes (8 GPUs, 128 cores; other 8-GPU nodes have at most 96),
    which the 8-GPU pods asking 120 cores need; CPU-rich, they are where CPU-heavy pods cost least."""
    n = table.rows
    gpus, cpu = table.gpu_count[:n], table.cpu_total[:n]
    out = []
    for k in sorted(set(gpus[gpus > 0].tolist())):
        with_k = gpus >= k
        levels = sorted(set(cpu[with_k].tolist()))
        for below in reversed(levels[:-1]):  # the richest tier first, then wider ones while still rare
            hosts = with_k & (cpu > below)
            if int(np.count_nonzero(hosts)) * RARE_HOSTS > int(np.count_nonzero(with_k)):
                break
            if np.all(gpus[hosts] == k):
                out.append((k, below + 1))
                break
    return out


class _Hosts:
    """The rows that could host a rare type when empty (`able`), their ledger versions when last
    looked at, and those that can now (`rows`) with their free GPUs, CPU and memory; `spare`: the
    most GPUs a host has beyond the type's count."""

    def __init__(self, able: IntArray) -> None:
        self.able = able
        self.version: IntArray | None = None
        self.rows = self.whole = self.cpu = self.mem = able[:0]
        self.spare = 0

    def update(self, table: NodeTable, version: IntArray, count: int, need: int, memory: int) -> None:
        whole, cpu, mem = table.gpu_whole[self.able], table.cpu_free[self.able], table.mem_free[self.able]
        ok = (whole >= count) & (cpu >= need) & (mem >= memory)
        self.version = version
        self.rows, self.whole, self.cpu, self.mem = self.able[ok], whole[ok], cpu[ok], mem[ok]
        self.spare = int(self.whole.max()) - count if self.rows.size else 0


class RareHosts:
    """One policy's view of the rare types' hosts: the least memory such pods have asked, and per
    type the rows that can host it, worked out again only when one of the few candidate rows changes
    (a few microseconds a decision)."""

    def __init__(self) -> None:
        self._memory: dict[int, int] = {}  # per GPU count: the least memory a rare pod has asked
        self._hosts: dict[tuple[int, int, int], _Hosts] = {}  # per (GPUs, CPU, memory)
        self._most_pods = 0.0  # pods the cluster's GPUs hold when empty (see `_keeps`)

    def forget(self) -> None:
        """Find the candidate rows again (after a relearn: nodes added or changed count from then on)."""
        self._hosts.clear()
        self._most_pods = 0.0

    def spoiled(
        self,
        rare: list[tuple[int, int]],
        rare_share: dict[int, float],
        pod_milli: float,
        shape: PodShape,
        table: NodeTable,
    ) -> IntArray | None:
        """The rows (of the whole table) where this pod would leave a host to keep unable to host its
        rare type; None when there are none. `rare`: (GPUs, least CPU) per rare GPU count;
        `rare_share`: their learned share of pods; `pod_milli`: the GPU milli a pod asks on average."""
        used = shape.count if shape.gpu else 0  # a share pod on a host takes one of its free GPUs
        if not self._most_pods:
            self._most_pods = float(table.gpu_usable[: table.rows].sum()) * MILLI / pod_milli
        out = None
        for count, need in rare:
            if shape.whole and shape.count >= count and shape.cpu_milli >= need:
                # a pod of the type (or a larger one): every node it can use is a host
                self._memory[count] = min(self._memory.get(count, shape.memory_bytes), shape.memory_bytes)
                continue
            memory = self._memory.get(count, 0)
            hosts = self._hosts_now(table, count, need, memory)
            if not hosts.rows.size or not self._keeps(hosts.rows.size, rare_share.get(count), pod_milli, table):
                continue
            if used and used > hosts.spare:  # the usual case: a GPU pod spoils every host
                spoiled = hosts.rows
            else:
                spoiled = hosts.rows[
                    (hosts.whole - used < count)
                    | (hosts.cpu - shape.cpu_milli < need)
                    | (hosts.mem - shape.memory_bytes < memory)
                ]
            if spoiled.size:
                out = spoiled if out is None else np.union1d(out, spoiled)
        return out

    def _keeps(self, hosts: int, share: float | None, pod_milli: float, table: NodeTable) -> bool:
        """Whether `hosts` hosts of a rare type are at most the reserve to keep: `RESERVE` times the
        pods of such types expected while the free GPUs last (their learned share times the pods the
        free GPU milli still holds), plus two; every host until such a type has been seen (`share`
        None). The free GPU milli is summed only when the answer depends on it."""
        if share is None or hosts <= 2:
            return True
        if hosts > RESERVE * share * self._most_pods + 3:  # more than even an empty cluster would keep
            return False
        pods_left = float(table.gpu_sum[: table.rows].sum()) / pod_milli
        return hosts <= math.ceil(RESERVE * share * pods_left) + 2

    def _hosts_now(self, table: NodeTable, count: int, need: int, memory: int) -> _Hosts:
        key = (count, need, memory)
        found = self._hosts.get(key)
        if found is None or (found.able.size and int(found.able[-1]) >= table.rows):
            if len(self._hosts) > 64:
                self._hosts.clear()
            n = table.rows
            able = (table.gpu_count[:n] >= count) & (table.cpu_total[:n] >= need) & (table.mem_total[:n] >= memory)
            found = self._hosts[key] = _Hosts(np.flatnonzero(able & table.active[:n]))
        version = table.version[found.able]
        if found.version is None or (version != found.version).any():
            found.update(table, version, count, need, memory)
        return found
