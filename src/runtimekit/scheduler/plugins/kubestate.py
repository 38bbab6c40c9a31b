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

import itertools
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from runtimekit.kube.semantics.tolerations import untolerated
from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import Constraints, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.values import Mask
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts, facts_for
from runtimekit.scheduler.kubesem.topology import Topology

_KEEP_SESSIONS = 4


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
        self.topology = scope(ssn).topology

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


class FollowsPlacements(Plugin):
    """The session events of a plugin that reads the session's shared state (`predicates`,
    `nodeorder`): the pods placed or evicted in the session join or leave its pod index, as
    kube-scheduler's AddPod / RemovePod do for its filters and scores."""

    _view: SessionView | None = None

    def on_session_open(self, ssn: SessionView) -> None:
        self._view = ssn

    def on_session_close(self, ssn: SessionView) -> None:
        close(ssn)
        self._view = None

    def on_allocate(self, task: TaskInfo) -> None:
        if self._view is not None:
            session(self._view).placed(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self._view is not None:
            session(self._view).left(task)


class NodeScope:
    """What is worked out once per set of node metadata: the topology, the per-constraint node
    masks, and a serial that plugins key their own node-level caches by."""

    _serials = itertools.count(1)

    def __init__(self, meta: Sequence[NodeMeta | None], version: int, rows: int) -> None:
        self.meta, self.version, self.rows = meta, version, rows
        self.serial = next(self._serials)
        labels: list[Mapping[str, str] | None] = [m.labels if m is not None else None for m in meta[:rows]]
        labels.extend([None] * (rows - len(labels)))
        self.topology = Topology(labels)
        self.masks: dict[Constraints, tuple[Mask, Mask]] = {}

    def same(self, meta: Sequence[NodeMeta | None], version: int, rows: int) -> bool:
        """Whether these are the metadata this scope was made from (equal version, row count and
        entries; the live cache hands out a fresh list of the same objects)."""
        if version != self.version or rows != self.rows:
            return False
        if meta is self.meta:
            return True
        if list(meta[:rows]) != list(self.meta[:rows]):
            return False
        self.meta = meta  # the next look is by identity
        return True


_scope: NodeScope | None = None


def scope(ssn: SessionView) -> NodeScope:
    """The node scope of a session's snapshot (reused while the node metadata is the same)."""
    global _scope
    snapshot = ssn.snapshot
    rows = ssn.table.rows
    if _scope is None or not _scope.same(snapshot.meta, snapshot.meta_version, rows):
        _scope = NodeScope(snapshot.meta, snapshot.meta_version, rows)
    return _scope


def node_masks(constraints: Constraints, ssn: SessionView) -> tuple[Mask, Mask]:
    """Per row: the node meets the pod's node selector and required node affinity / carries no
    NoSchedule or NoExecute taint the pod does not tolerate (topology spread's inclusion policies)."""
    nodes = scope(ssn)
    found = nodes.masks.get(constraints)
    if found is None:
        if len(nodes.masks) > 256:
            nodes.masks.clear()
        metas = nodes.meta[: nodes.rows]
        tolerations = constraints.tolerations
        affinity = np.array([m is not None and constraints.matches_node(m) for m in metas], np.bool_)
        tolerated = np.array([m is not None and untolerated(m.taints, tolerations) is None for m in metas], np.bool_)
        found = nodes.masks[constraints] = (affinity, tolerated)
    return found


def facts(task: TaskInfo) -> PodFacts:
    """A task's pod facts, parsed once per manifest object."""
    return facts_for(task.key, task.pod, task.namespace)
