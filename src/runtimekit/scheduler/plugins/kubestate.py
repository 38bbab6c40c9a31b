"""The state the predicates and nodeorder plugins share for inter-pod affinity, topology spread and
host ports (kube-scheduler's PreFilter/PreScore state and its AddPod/RemovePod):

- per session, in its cycle state: a `KubeSession` with the `PodIndex` over the snapshot's placed
  pods, kept current by the session's placements and evictions (both plugins forward their events;
  the index ignores repeats), made on first use;
- across sessions, in a `KubeShared` the plugins take from their `BuildContext` when they are built
  (`shared`): the `NodeScope` of the snapshot's node metadata (topology, per-constraint node
  masks), kept while the metadata lasts;
- each pod's `PodFacts`, parsed once per manifest into the memo the cache lends the session
  (`facts`; the cache owns it and books the pods placed without parsing them again).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from runtimekit.kube.semantics.tolerations import untolerated
from runtimekit.model import LedgerError
from runtimekit.scheduler.framework.info import Constraints, NodeMeta, TaskInfo
from runtimekit.scheduler.framework.interfaces import Plugin
from runtimekit.scheduler.framework.registry import BuildContext
from runtimekit.scheduler.framework.state import StateKey
from runtimekit.scheduler.framework.values import Mask
from runtimekit.scheduler.framework.view import SessionView
from runtimekit.scheduler.kubesem.index import PodIndex
from runtimekit.scheduler.kubesem.pods import PodFacts
from runtimekit.scheduler.kubesem.topology import Topology


class NodeScope:
    """What is worked out once per set of node metadata: the topology, the per-constraint node
    masks, and a serial (unique within its `KubeShared`) that plugins key their own node-level
    caches by."""

    def __init__(self, meta: Sequence[NodeMeta | None], version: int, rows: int, serial: int) -> None:
        self.meta, self.version, self.rows = meta, version, rows
        self.serial = serial
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


class KubeSession:
    """One session's placed pods and node topology."""

    def __init__(self, ssn: SessionView, shared: KubeShared) -> None:
        table = ssn.table

        def row_of(node: str) -> int | None:
            try:
                return table.row(node)
            except LedgerError:
                return None

        self.row_of = row_of
        self.index = PodIndex(ssn.snapshot.pods, row_of, table.rows)
        self.topology = shared.scope(ssn).topology
        self._facts = ssn.snapshot.pod_facts

    def placed(self, task: TaskInfo) -> None:
        """A task took a node in the session (or an eviction was undone)."""
        row = self.row_of(task.node) if task.node else None
        if row is not None:
            self.index.add(task.key, self._facts.of(task.key, task.pod, task.namespace), row)

    def left(self, task: TaskInfo) -> None:
        """A task gave its node back in the session (evicted, or its placement undone)."""
        self.index.remove(task.key)


_SESSION: StateKey[KubeSession] = StateKey("kubestate/session")
_SHARED: StateKey[KubeShared] = StateKey("kubestate/shared")


class KubeShared:
    """What the inter-pod plugins built with one context keep across sessions: the node scope of
    the latest snapshot. Used on the scheduling thread only."""

    def __init__(self) -> None:
        self._scope: NodeScope | None = None
        self._serials = itertools.count(1)

    def scope(self, ssn: SessionView) -> NodeScope:
        """The node scope of a session's snapshot (reused while the node metadata is the same)."""
        snapshot = ssn.snapshot
        rows = ssn.table.rows
        found = self._scope
        if found is None or not found.same(snapshot.meta, snapshot.meta_version, rows):
            found = self._scope = NodeScope(snapshot.meta, snapshot.meta_version, rows, next(self._serials))
        return found

    def session(self, ssn: SessionView) -> KubeSession:
        """The session's placed pods and topology, made on first use."""
        found = ssn.state.get(_SESSION)
        if found is None:
            found = KubeSession(ssn, self)
            ssn.state.write(_SESSION, found)
        return found

    def node_masks(self, constraints: Constraints, ssn: SessionView) -> tuple[Mask, Mask]:
        """Per row: the node meets the pod's node selector and required node affinity / carries no
        NoSchedule or NoExecute taint the pod does not tolerate (topology spread's inclusion policies)."""
        nodes = self.scope(ssn)
        found = nodes.masks.get(constraints)
        if found is None:
            if len(nodes.masks) > 256:
                nodes.masks.clear()
            metas = nodes.meta[: nodes.rows]
            tolerations = constraints.tolerations
            affinity = np.array([m is not None and constraints.matches_node(m) for m in metas], np.bool_)
            tolerated = np.array(
                [m is not None and untolerated(m.taints, tolerations) is None for m in metas], np.bool_
            )
            found = nodes.masks[constraints] = (affinity, tolerated)
        return found


def facts(task: TaskInfo, ssn: SessionView) -> PodFacts:
    """A task's pod facts, parsed once per manifest (into the memo the session's cache lends it)."""
    return ssn.snapshot.pod_facts.of(task.key, task.pod, task.namespace)


def shared(context: BuildContext) -> KubeShared:
    """The `KubeShared` of the plugins built with `context`, made by the first that asks."""
    found = context.shared.get(_SHARED)
    if found is None:
        found = KubeShared()
        context.shared.write(_SHARED, found)
    return found


class FollowsPlacements(Plugin):
    """The session events of a plugin that reads the session's shared state (`predicates`,
    `nodeorder`): the pods placed or evicted in the session join or leave its pod index, as
    kube-scheduler's AddPod / RemovePod do for its filters and scores. `kube` is the state it shares
    with the other inter-pod plugins built with its context (its own when built without one)."""

    _view: SessionView | None = None

    def __init__(self, kube: KubeShared | None = None) -> None:
        self.kube = kube if kube is not None else KubeShared()

    def on_session_open(self, ssn: SessionView) -> None:
        self._view = ssn

    def on_session_close(self, ssn: SessionView) -> None:
        self._view = None

    def on_allocate(self, task: TaskInfo) -> None:
        if self._view is not None:
            self.kube.session(self._view).placed(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self._view is not None:
            self.kube.session(self._view).left(task)
