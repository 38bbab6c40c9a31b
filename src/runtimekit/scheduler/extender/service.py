"""kube-scheduler's extender verbs as plain calls on the kit's scheduler: filter, prioritize, bind and
preempt for one pod, each a session of the same framework (plugins, policies, ledger) the standalone
scheduler runs, on the live side of `cache/live.py` (scheduling queue, cluster cache fed by informers,
binder). The HTTP handler (`http.py`) only translates messages to these calls and back.

- filter: the session's checks (`verdicts.py`) over the nodes kube-scheduler names; each failing
  node with its reason, apart when no eviction helps it;
- prioritize: the framework's node scores over the nodes that pass, as 0..10 (`scores.py`);
- bind: the pod is placed on kube-scheduler's node as the standalone scheduler places a pod on its
  chosen node (GPUs by the policy, Reserve, a statement committed: the cluster cache assumes it),
  then bound by the binder's own path (PreBind, the signed assignment, the `Binding`), on the
  caller's thread: the answer comes once the pod is bound or refused;
- preempt: of kube-scheduler's candidate nodes, those where evicting its victims makes room for
  the pod's GPUs, with the victims unchanged.
A pod that asks for none of the kit's resources passes through untouched: every node passes, with
equal scores, no victims are dropped, and bind (asked only when kube-scheduler's managedResources
leave such pods to this binder) binds it without an assignment.

The plugins are not thread-safe, so one call at a time runs a session (`lock`); a bind's API request
runs after its session, outside the lock. Filter and prioritize read the cache's table in place,
holding the cluster cache's lock for the few milliseconds they take.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np

from runtimekit.model import LedgerError, NodeName, Placement, PodKey
from runtimekit.model.ledger import IntArray
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.cache.live import LiveCache
from runtimekit.scheduler.cache.objects import task_from_pod
from runtimekit.scheduler.extender.interest import asks_kit_resources
from runtimekit.scheduler.extender.scores import extender_scores
from runtimekit.scheduler.extender.snapshot import NodeView
from runtimekit.scheduler.extender.verdicts import RowVerdicts, check_rows
from runtimekit.scheduler.extender.wire import BindingArgs, ExtenderArgs, FilterAnswer, MetaVictims, PreemptionArgs
from runtimekit.scheduler.framework import Framework
from runtimekit.scheduler.framework.binding import BindGroup, BindHooks
from runtimekit.scheduler.framework.info import JobInfo, Snapshot, TaskInfo
from runtimekit.scheduler.framework.session import Session
from runtimekit.scheduler.framework.status import Status
from runtimekit.scheduler.framework.values import DeviceChoice, Mask

UNKNOWN_NODE = "node is not known to the extender (not seen yet, or deleted)"
TASK_MEMO = 256  # pods whose parsed task filter and prioritize keep (kube-scheduler asks both in a row)


class Verbs:
    """The four verbs over one set of live parts (see the module docstring)."""

    def __init__(
        self,
        framework: Framework,
        live: LiveCache,
        nodes: NodeView,
        protocol: KitProtocol,
        lock: threading.Lock,
        bind_wait: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.framework, self.live, self.nodes, self.protocol = framework, live, nodes, protocol
        self.cache = live.cache
        self.lock = lock  # one call at a time uses the plugins (shared by every set of live parts)
        self.bind_wait = bind_wait  # how long a bind waits for a pod its informer has not shown yet
        self._sleep = sleep
        self._tasks: dict[str, tuple[str, TaskInfo]] = {}  # pod UID -> (resourceVersion, task)

    # -- filter and prioritize -------------------------------------------------------------
    def filter(self, args: ExtenderArgs) -> FilterAnswer:
        names = args.names
        if not asks_kit_resources(args.pod, self.protocol):
            return FilterAnswer(names)
        task = self._task(args)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        with self.lock, self.cache.lock:
            ssn = self.framework.open_session(_Call(self, copy=False))
            try:
                rows, known = self.nodes.rows(names)
                verdicts = check_rows(ssn, task, rows)
                hopeless = verdicts.hopeless()
                for group, why in verdicts.failed:
                    apart = np.isin(group, hopeless) if hopeless.size else np.zeros(group.size, np.bool_)
                    unresolvable.update(dict.fromkeys(self.nodes.names_of(group[apart]), why))
                    failed.update(dict.fromkeys(self.nodes.names_of(group[~apart]), why))
                listed = names if known is None else list(compress(names, known))
                passed = tuple(compress(listed, _kept(rows, verdicts.passed).tolist()))
                self.nodes.remember(passed, verdicts.passed)
            finally:
                self.framework.close_session(ssn)
        if verdicts.error:
            return FilterAnswer(error=verdicts.error)
        if known is not None:
            failed.update((name, UNKNOWN_NODE) for name, k in zip(names, known, strict=True) if not k)
        return FilterAnswer(passed, failed, unresolvable)

    def prioritize(self, args: ExtenderArgs) -> Priorities:
        names = args.names
        if not asks_kit_resources(args.pod, self.protocol):
            return Priorities(names, [0] * len(names))
        task = self._task(args)
        with self.lock, self.cache.lock:
            ssn = self.framework.open_session(_Call(self, copy=False))
            try:
                rows, known = self.nodes.rows(names)
                passed = check_rows(ssn, task, rows).passed
                scores = np.zeros(rows.size, np.int64)  # a node that does not fit scores 0
                if passed.size:
                    raw = ssn.node_order(task, passed)
                    best = ssn.best_node(task, passed, raw)
                    scores[_kept(rows, passed)] = extender_scores(raw, int(np.flatnonzero(passed == best)[0]))
            finally:
                self.framework.close_session(ssn)
        if known is None:
            return Priorities(names, scores.tolist())
        listed = iter(scores.tolist())
        return Priorities(names, [next(listed) if k else 0 for k in known])

    def _task(self, args: ExtenderArgs | PreemptionArgs) -> TaskInfo:
        """The pod kube-scheduler sent, as a task, parsed once per pod version."""
        meta = args.pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        kept = self._tasks.get(uid) if uid else None
        if kept is not None and kept[0] == version and version:
            return kept[1]
        task = task_from_pod(args.pod, self.protocol, kept[1] if kept is not None else None)
        if uid:
            if len(self._tasks) >= TASK_MEMO:
                self._tasks.clear()
            self._tasks[uid] = (version, task)
        return task

    # -- bind ------------------------------------------------------------------------------
    def bind(self, args: BindingArgs) -> str | None:
        """Bind the pod to `args.node`; None when it is bound, else why not."""
        pending = self._pending(args)
        if not isinstance(pending, TaskInfo):
            return pending
        call = _Call(self, copy=True)
        with self.lock:
            with self.cache.lock:
                ssn = self.framework.open_session(call)
            try:
                refused = _place(ssn, pending, args.node)
            finally:
                self.framework.close_session(ssn)
        if refused is not None:
            return refused
        if call.assumed is None:
            return call.failure or "the pod could not be assumed"
        task, choice, hooks = call.assumed
        return self.live.binder.bind_now(task, choice, hooks)

    def _pending(self, args: BindingArgs) -> TaskInfo | str | None:
        """The pending pod to bind (a copy of its task), or why there is none; None when the pod is
        already bound to that node (a bind asked again)."""
        name = f"{args.pod_namespace}/{args.pod_name}"
        deadline = time.monotonic() + self.bind_wait
        while True:
            with self.cache.lock:
                key = PodKey(args.pod_uid) if args.pod_uid else self.cache.uid_of.get(name)
                entry = self.live.queue.get(key) if key is not None else None
                running = self.cache.running.get(key) if key is not None else None
                known = self.cache.uid_of.get(name)
                if entry is not None:
                    if entry.binding or key in self.cache.assumed:
                        return f"pod {name}: a bind of it is already in flight"
                    if f"{entry.task.namespace}/{entry.task.name}" != name:
                        return f"pod {name}: UID {args.pod_uid} is another pod's"
                    return entry.task.clone()
            if running is not None:
                return None if running.node == args.node else f"pod {name} is already bound to node {running.node}"
            if known is not None and args.pod_uid and known != args.pod_uid:
                return f"pod {name} was deleted and created again (its UID is no longer {args.pod_uid})"
            if known is not None:
                names = ", ".join(sorted(self.cache.scheduler_names))
                return (
                    f"pod {name} is not pending for this extender: it is being deleted, or its schedulerName is "
                    f"none of {names} (add it with --scheduler-name)"
                )
            if time.monotonic() >= deadline:
                return f"pod {name} not found: deleted, or not seen yet"
            self._sleep(0.02)

    # -- preempt ---------------------------------------------------------------------------
    def preempt(self, args: PreemptionArgs) -> dict[str, MetaVictims]:
        """The candidate nodes where evicting their victims makes room for the pod, victims unchanged."""
        if not asks_kit_resources(args.pod, self.protocol):
            return {node: v for node, v in args.victims.items() if v.uids}
        task = self._task(args)
        kept: dict[str, MetaVictims] = {}
        with self.lock:
            with self.cache.lock:
                ssn = self.framework.open_session(_Call(self, copy=True))
                held = {uid: self.cache.ledger.booking(PodKey(uid)) for v in args.victims.values() for uid in v.uids}
            try:
                for node, victims in args.victims.items():
                    if victims.uids and _fits_without(ssn, task, node, [held.get(uid) for uid in victims.uids]):
                        kept[node] = victims
            finally:
                self.framework.close_session(ssn)
        return kept


@dataclass(frozen=True)
class Priorities:
    """A prioritize answer: each named node's score, 0 to 10, in the order named."""

    names: Sequence[str]
    scores: list[int]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(zip(self.names, self.scores, strict=True))


@dataclass
class _Call:
    """One call's side of the framework's `Cache`: its snapshot, and what its committed statement
    binds (the pod the cluster cache assumed, bound after the session by `Verbs.bind`)."""

    verbs: Verbs
    copy: bool
    assumed: tuple[TaskInfo, DeviceChoice, BindHooks] | None = None
    failure: str = ""

    def snapshot(self) -> Snapshot:
        return self.verbs.nodes.snapshot(self.copy)

    def bind(self, task: TaskInfo, choice: DeviceChoice, hooks: BindHooks, group: BindGroup | None = None) -> None:
        del group  # kube-scheduler binds one pod per call: there are no gangs to bind together here
        bound = self.verbs.cache.assume(task)
        if bound is None:
            hooks.unreserve(task)
            self.failure = "the cluster changed under the pod (its GPUs were taken, or it was deleted or bound)"
            return
        self.assumed = (bound, choice, hooks)

    def evict(self, task: TaskInfo, reason: str) -> None:
        raise AssertionError("the extender's sessions evict nothing: kube-scheduler preempts")

    def job_updated(self, job: JobInfo) -> None:
        return  # kube-scheduler reports on the pod


def _kept(rows: IntArray, passed: IntArray) -> Mask:
    """Which of `rows` are in `passed` (a subsequence of them, as the checks keep their order)."""
    if passed.size == rows.size:
        return np.ones(rows.size, np.bool_)
    return np.isin(rows, passed)


def _place(ssn: Session, task: TaskInfo, node: str) -> str | None:
    """Place `task` on `node` in the session and commit (the cache assumes it); why not, if it does not fit."""
    try:
        row = ssn.table.row(node)
    except LedgerError:
        return f"node {node}: {UNKNOWN_NODE}"
    verdicts: RowVerdicts = check_rows(ssn, task, np.array([row], np.int64))
    if verdicts.error:
        return verdicts.error
    if not verdicts.passed.size:
        return f"pod no longer fits on node {node}: {verdicts.reason(row)}"
    choice = ssn.allocate_devices(task, row)
    if isinstance(choice, Status):
        return f"no devices on node {node}: {choice.message}"
    statement = ssn.statement()
    try:
        statement.allocate(task, row, choice)
    except LedgerError as exc:
        return f"pod no longer fits on node {node}: {exc}"
    statement.commit()
    return None


def _fits_without(ssn: Session, task: TaskInfo, node: str, victims: Sequence[Placement | None]) -> bool:
    """Whether the pod fits on `node` once the victims' bookings there are given back (on the
    session's own table, restored afterwards)."""
    table = ssn.table
    if not table.has_node(node):
        return False
    freed = [p for p in victims if p is not None and p.node == NodeName(node)]
    for placement in freed:
        table.give(placement)
    try:
        return bool(check_rows(ssn, task, np.array([table.row(node)], np.int64)).passed.size)
    finally:
        for placement in reversed(freed):
            table.take(placement, allow_unusable=True)
