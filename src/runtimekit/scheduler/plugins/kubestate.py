"""The per-session state the predicates and nodeorder plugins share for inter-pod affinity, topology
spread and host ports (kube-scheduler's PreFilter/PreScore state and its AddPod/RemovePod):

- `PodIndex` over the snapshot's placed pods, kept current by the session's placements and
  evictions (both plugins forward their events; the index ignores repeats);
- the node `Topology` of the snapshot's node labels, kept across sessions while the labels last;
- each pending pod's `PodFacts`, parsed once per manifest.

Module-level because plugins are separate objects that must see one index per session; the
scheduler runs one session at a time (a few recent ones are kept for tests that hold several).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import Constraints, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.values import Mask
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts, plain_facts, pod_facts
from runtimekit.scheduler.kubesem.taints import untolerated
from runtimekit.scheduler.kubesem.topology import Topology

_KEEP_SESSIONS = 4
_KEEP_FACTS = 1 << 16


class KubeSession:
    """One session's placed pods and node topology."""

    def __init__(self, ssn: SessionView) -> None:
        table = ssn.table

        def row_of(node: str) -> int | None:
            try:
                return table.row(node)
            except LedgerError:
                return None

        self.row_of = row_of
        self.index = PodIndex(ssn.snapshot.pods, row_of, table.rows)
        self.topology = topology_of(ssn.snapshot.meta, ssn.snapshot.meta_version, table.rows)

    def placed(self, task: TaskInfo) -> None:
        """A task took a node in the session (or an eviction was undone)."""
        row = self.row_of(task.node) if task.node else None
        if row is not None:
            self.index.add(task.key, facts(task), row)

    def left(self, task: TaskInfo) -> None:
        """A task gave its node back in the session (evicted, or its placement undone)."""
        self.index.remove(task.key)


_sessions: OrderedDict[int, KubeSession] = OrderedDict()


def session(ssn: SessionView) -> KubeSession:
    """The shared state of a session, made on first use."""
    found = _sessions.get(ssn.uid)
    if found is None:
        found = _sessions[ssn.uid] = KubeSession(ssn)
        while len(_sessions) > _KEEP_SESSIONS:
            _sessions.popitem(last=False)
    return found


def close(ssn: SessionView) -> None:
    _sessions.pop(ssn.uid, None)


_topology: tuple[int, int, Sequence[NodeMeta | None], Topology] | None = None


def topology_of(meta: Sequence[NodeMeta | None], version: int, rows: int) -> Topology:
    """The topology of the nodes' labels, reused while the node metadata is the same (equal
    version, row count and entries; the live cache hands out a fresh list of the same objects)."""
    global _topology
    if _topology is not None:
        old_version, old_rows, old_meta, found = _topology
        if old_version == version and old_rows == rows and (old_meta is meta or list(old_meta) == list(meta)):
            return found
    labels: list[Mapping[str, str] | None] = [m.labels if m is not None else None for m in meta[:rows]]
    labels.extend([None] * (rows - len(labels)))
    made = Topology(labels)
    _topology = (version, rows, meta, made)
    return made


_facts: dict[str, tuple[Any, PodFacts]] = {}


def facts(task: TaskInfo) -> PodFacts:
    """A task's pod facts, parsed once per manifest object."""
    pod = task.pod
    if pod is None:
        return plain_facts(task.namespace)
    found = _facts.get(task.key)
    if found is not None and found[0] is pod:
        return found[1]
    if len(_facts) >= _KEEP_FACTS:
        _facts.clear()
    parsed = pod_facts(pod)
    _facts[task.key] = (pod, parsed)
    return parsed


_masks: dict[tuple[Constraints, int, int], tuple[Mask, Mask]] = {}


def node_masks(constraints: Constraints, ssn: SessionView) -> tuple[Mask, Mask]:
    """Per row: the node meets the pod's node selector and required node affinity / carries no
    NoSchedule or NoExecute taint the pod does not tolerate (topology spread's inclusion policies)."""
    key = (constraints, ssn.snapshot.meta_version, ssn.table.rows)
    found = _masks.get(key)
    if found is None:
        if len(_masks) > 256:
            _masks.clear()
        metas = ssn.snapshot.meta[: ssn.table.rows]
        tolerations = constraints.tolerations
        affinity = np.array([m is not None and constraints.matches_node(m) for m in metas], np.bool_)
        tolerated = np.array([m is not None and untolerated(m.taints, tolerations) is None for m in metas], np.bool_)
        found = _masks[key] = (affinity, tolerated)
    return found
