"""The extender's snapshots of the live cluster cache, one per call: the same node table, node
metadata, ranks and pods on nodes a standalone session reads (`cache/snapshot.py`), with no jobs (the
extender is asked about one pod at a time, which kube-scheduler hands it).

Two kinds, because a call must cost milliseconds at thousands of nodes:
- a *read* snapshot (filter, prioritize) shares the cache's node table itself: the call holds the
  cluster cache's lock from the snapshot until its session closes, and reads only;
- a *bind* snapshot (bind, preempt) copies the table, which the call's statement changes.
What a snapshot reads of the nodes alone (`NodeFacts`: metadata, GPU models, capacity) is worked out
once per change of the nodes and kept: `NodeView.changed` is told of every node event.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from runtimekit.kube.objects import Node
from runtimekit.model.ledger import IntArray
from runtimekit.scheduler.cache.cluster import ClusterCache
from runtimekit.scheduler.cache.snapshot import NodeFacts, node_facts, node_rank
from runtimekit.scheduler.framework.info import Snapshot


class NodeView:
    """Snapshots of one cluster cache for extender calls; node events pass through `on_node`."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self._generation = 0  # node events seen
        self._facts: NodeFacts | None = None
        self._facts_of: tuple[int, int, int] = (-1, -1, -1)
        self._lock = threading.Lock()
        # node name -> row, every node's name in row order, and the name of each row (an object array,
        # to read many at once), while the rows stay as they are
        self._row_of: dict[str, int] = {}
        self._in_order: tuple[str, ...] = ()
        self._name_at: npt.NDArray[np.object_] = np.empty(0, np.object_)
        self._rows_of: tuple[int, int] = (-1, -1)
        # the latest subset of nodes asked about and its rows: prioritize names the nodes filter passed
        self._subset: tuple[tuple[str, ...], IntArray] = ((), np.zeros(0, np.int64))

    def on_node(self, kind: str, obj: Node) -> None:
        """A node event (the informer's handler): to the cache, and the kept facts are stale."""
        self.cache.on_node(kind, obj)
        with self._lock:
            self._generation += 1

    def facts(self) -> NodeFacts:
        """The nodes' facts as the cache holds them now (call under the cache's lock)."""
        cache = self.cache
        with self._lock:
            key = (self._generation, cache.meta_version, cache.ledger.table.rows)
            if self._facts is None or key != self._facts_of:
                self._facts, self._facts_of = node_facts(cache), key
            return self._facts

    def rows(self, names: Sequence[str]) -> tuple[IntArray, list[bool] | None]:
        """The table rows of the named nodes the table knows, in the order named, and which names it
        knows (None: all of them); call under the cache's lock. kube-scheduler names thousands of
        nodes per call, most often every node in the same order (answered with the table's own row
        array, on which the session's checks take their fastest paths) or, to prioritize, the nodes
        the filter before passed (`remember`)."""
        self._refresh()
        table = self.cache.ledger.table
        if len(names) == len(self._in_order) and tuple(names) == self._in_order:
            return table.active_rows(), None
        subset, subset_rows = self._subset
        if len(names) == len(subset) and tuple(names) == subset:
            return subset_rows, None
        get = self._row_of.get
        rows = np.array([get(name, -1) for name in names], np.int64)
        known = rows >= 0
        if known.all():
            return rows, None
        return rows[known], known.tolist()

    def remember(self, names: Sequence[str], rows: IntArray) -> None:
        """`names` are at `rows` (a filter's answer, which kube-scheduler asks to prioritize next)."""
        self._subset = (tuple(names), rows)

    def names_of(self, rows: IntArray) -> list[str]:
        """The names of the nodes at `rows` (call under the cache's lock)."""
        self._refresh()
        named: list[str] = self._name_at[rows].tolist()
        return named

    def _refresh(self) -> None:
        cache = self.cache
        table = cache.ledger.table
        key = (cache.meta_version, table.rows)  # a node added or removed changes the metadata's version
        if key == self._rows_of:
            return
        rows = table.active_rows()
        named = table.names()
        self._in_order = tuple(str(named[row]) for row in rows.tolist())
        self._row_of = dict(zip(self._in_order, rows.tolist(), strict=True))
        self._name_at = np.empty(table.rows, np.object_)
        self._name_at[rows] = self._in_order
        self._subset = ((), np.zeros(0, np.int64))
        self._rows_of = key

    def snapshot(self, copy: bool) -> Snapshot:
        """A snapshot of the cache now; `copy`: with a table of its own (call under the cache's lock;
        without `copy`, keep holding it while the snapshot is used)."""
        cache = self.cache
        facts = self.facts()
        return Snapshot(
            cache.ledger.table.copy() if copy else cache.ledger.table,
            facts.metas,
            {},
            {},
            node_rank(cache),
            facts.model_ids,
            facts.model_names,
            cache.clock(),
            cache.meta_version,
            facts.capacity,
            {},
            cache.pods.frozen,  # frozen only if a plugin reads the pods on nodes (inter-pod affinity)
            pod_facts=cache.pods.facts,
        )
