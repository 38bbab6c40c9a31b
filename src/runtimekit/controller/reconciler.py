"""The node controller: turns the runtime of a node on or off through a Job on that node.

Level-based reconciliation per node (idempotent, restart-safe):
1. The trigger says what the node should be (`enable`/`disable`). When that differs from the
   node's recorded request (annotation `runtimekit.aliyun.com/runtime-request: "<change>:<action>"`),
   the change number goes up and the request is recorded with a resourceVersion-guarded patch —
   so a flapping label (true/false/true) yields one change per observed value, the last one wins.
2. Jobs of the node for any other change are cancelled (deleted with their pods).
3. The Job of the current change is created under a deterministic name (a restarted controller
   finds it instead of making another). When it succeeds the node's state label becomes
   `enabled`/`disabled`; when it fails, `failed`, with a Warning Event on the Node giving the
   job-agent's message. The change is then recorded as done, so nothing reruns after cleanup.
4. Succeeded Jobs (and their pods) are deleted after `success_ttl`; failed ones are kept, the
   newest `failed_history` per node.
Errors steer what happens next, as kopf's `TemporaryError` and `PermanentError` do: a temporary one
(a conflict, an API server that is unreachable, throttles or fails: `KubeError.retryable`) and any
unexpected exception are retried with a per-node exponential back-off; a permanent one (the request
is invalid or forbidden, the namespace is missing) stops reconciling that node, with a Warning
Event `ReconcileFailed` on it, until the node or one of its Jobs changes (the periodic resync does
not restart it: the same request would fail the same way).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from runtimekit._version import DEFAULT_IMAGE
from runtimekit.base.timestamps import parse_rfc3339, rfc3339
from runtimekit.base.workqueue import WorkQueue
from runtimekit.controller.jobs import (
    CONTROLLER,
    DONE_ANNOTATION,
    MANAGED_BY,
    NODE_ANNOTATION,
    REQUEST_ANNOTATION,
    JobSpec,
    Template,
    job_name,
)
from runtimekit.controller.trigger import Trigger
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import event_body, post_event
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import DeleteOptions, Job, JsonObject, Node, Pod, annotations_of, meta
from runtimekit.protocol import KitProtocol

log = logging.getLogger(__name__)
STATE_FOR = {"enable": "enabled", "disable": "disabled"}


@dataclass
class ControllerOptions:
    namespace: str = "kube-system"
    image: str = DEFAULT_IMAGE
    job_prefix: str = "lj-runtimekit"
    success_ttl: float = 60.0
    failed_history: int = 3
    event_namespace: str = "default"


def parse_request(node: Node) -> tuple[int, str | None]:
    text = str(annotations_of(node).get(REQUEST_ANNOTATION, ""))
    change, _, action = text.partition(":")
    try:
        return int(change), action if action in STATE_FOR else None
    except ValueError:
        return 0, None


def done_change(node: Node) -> int:
    try:
        return int(annotations_of(node).get(DONE_ANNOTATION, "-1"))
    except ValueError:
        return -1


def job_outcome(job: Job) -> tuple[str, str, float]:
    """("running" | "succeeded" | "failed", message, finished-at epoch seconds)."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        when = _epoch(condition.get("lastTransitionTime") or status.get("completionTime"))
        if condition.get("type") == "Complete":
            return "succeeded", str(condition.get("message", "")), when
        if condition.get("type") == "Failed":
            return "failed", str(condition.get("message") or condition.get("reason") or ""), when
    if status.get("succeeded"):
        return "succeeded", "", _epoch(status.get("completionTime"))
    return "running", "", 0.0


def _epoch(text: object) -> float:
    return parse_rfc3339(text) or 0.0


class RetryLater(Exception):
    """The node changed under a write: reconcile it again after a back-off (a temporary error)."""


class NodeController:
    def __init__(
        self,
        http: KubeHttp,
        protocol: KitProtocol,
        trigger: Trigger,
        template: Template,
        options: ControllerOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http, self.protocol, self.trigger, self.template = http, protocol, trigger, template
        self.options = options or ControllerOptions()
        self.clock = clock
        self.lock = threading.Lock()
        self.nodes: dict[str, Node] = {}
        self.jobs: dict[str, Job] = {}
        self.queue = WorkQueue()
        self.reconciles = 0
        self.halted: dict[str, str] = {}  # node -> its resourceVersion when a permanent error stopped it

    # -- informer handlers -----------------------------------------------------------------
    def on_node(self, kind: str, node: Node) -> None:
        name = str(meta(node).get("name", ""))
        with self.lock:
            if kind == "DELETED":
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = node
            if kind == "DELETED" or self.halted.get(name) != meta(node).get("resourceVersion"):
                self.halted.pop(name, None)
            elif name in self.halted:
                return  # the node is as it was when it failed for good: nothing new to try
        self.queue.add(name)

    def on_job(self, kind: str, job: Job) -> None:
        name = str(meta(job).get("name", ""))
        with self.lock:
            if kind == "DELETED":
                previous = self.jobs.pop(name, None)
                node = str(annotations_of(previous).get(NODE_ANNOTATION, "")) if previous else ""
            else:
                self.jobs[name] = job
                node = str(annotations_of(job).get(NODE_ANNOTATION, ""))
            self.halted.pop(node, None)
        if node:
            self.queue.add(node)

    # -- the loop --------------------------------------------------------------------------
    def run_worker(self, stop: threading.Event, leading: Callable[[], bool] = lambda: True) -> None:
        while not stop.is_set():
            key = self.queue.get(timeout=0.5)
            if key is not None:
                self.process(key, leading)

    def process(self, key: str, leading: Callable[[], bool] = lambda: True) -> None:
        """Reconcile one node the queue handed out, then decide when it comes back (see the module
        docstring); a standby (not `leading`) looks again in a second."""
        try:
            if leading():
                self.reconcile(key)
                self.queue.forget(key)
            else:
                self.queue.add_after(key, 1.0)
        except KubeError as exc:
            if exc.retryable:
                log.info("node %s: %s; again in %.1f s", key, exc, self.queue.retry(key))
            else:
                self._halt(key, exc)
        except RetryLater as exc:
            log.info("node %s: %s; again in %.1f s", key, exc, self.queue.retry(key))
        except Exception:
            delay = self.queue.retry(key)
            log.exception("node %s: reconcile failed; again in %.1f s", key, delay)
        finally:
            self.queue.done(key)

    def _halt(self, node: str, error: KubeError) -> None:
        """A permanent error: stop reconciling `node` until it or one of its Jobs changes."""
        self.queue.forget(node)
        with self.lock:
            self.halted[node] = str(meta(self.nodes.get(node) or {}).get("resourceVersion", ""))
        log.error("node %s: %s; not retried until the node or its Jobs change", node, error)
        self.event(node, "Warning", "ReconcileFailed", f"{error} (not retried until the node or its Jobs change)")

    def resync(self) -> None:
        with self.lock:
            names = set(self.nodes) | {str(annotations_of(j).get(NODE_ANNOTATION, "")) for j in self.jobs.values()}
            names -= set(self.halted)
        for name in names - {""}:
            self.queue.add(name)

    # -- reconcile -------------------------------------------------------------------------
    def reconcile(self, node_name: str) -> None:
        self.reconciles += 1
        with self.lock:
            node = self.nodes.get(node_name)
            jobs = {n: j for n, j in self.jobs.items() if annotations_of(j).get(NODE_ANNOTATION) == node_name}
        if node is None:
            for name in jobs:
                self._delete_job(name)
            return
        change, requested = parse_request(node)
        desired = self.trigger.desired(node)
        if desired is not None and desired != requested:
            change, requested = change + 1, desired
            node = self._patch_node(node, annotations={REQUEST_ANNOTATION: f"{change}:{desired}"})
            log.info("node %s: change %d: %s the runtime", node_name, change, desired)
        current = job_name(self.options.job_prefix, requested, node_name, change) if requested else None
        for name, job in jobs.items():
            if name != current and job_outcome(job)[0] == "running":
                log.info("node %s: cancelling superseded Job %s", node_name, name)
                self._delete_job(name)
        if requested is not None and current is not None and done_change(node) < change:
            self._drive(node, requested, change, current, jobs.get(current))
        self._clean_up(node_name, {n: j for n, j in jobs.items() if n != current or done_change(node) >= change})

    def _drive(self, node: Node, action: str, change: int, name: str, job: Job | None) -> None:
        node_name = str(meta(node)["name"])
        if job is None:
            spec = JobSpec(
                name,
                self.options.namespace,
                node_name,
                action,
                change,
                self.options.image,
                self.protocol.sockets.runtime,
                tuple((node.get("spec") or {}).get("taints") or ()),
            )
            try:
                created = self.http.post(
                    object_path("batch/v1", "jobs", self.options.namespace), self.template.render(spec)
                )
            except KubeError as exc:
                if exc.code != 409:
                    raise
                return
            with self.lock:
                self.jobs[name] = cast(Job, created)
            return
        outcome, message, _ = job_outcome(job)
        if outcome == "running":
            return
        if outcome == "succeeded":
            state = STATE_FOR[action]
            self._patch_node(
                node, labels={self.protocol.labels.state: state}, annotations={DONE_ANNOTATION: str(change)}
            )
            self.event(node_name, "Normal", f"Runtime{state.capitalize()}", f"runtime {state} by Job {name}")
            self.queue.add_after(node_name, self.options.success_ttl + 0.1)
            return
        reason = self._failure_reason(name) or message or "the job-agent failed"
        self._patch_node(
            node, labels={self.protocol.labels.state: "failed"}, annotations={DONE_ANNOTATION: str(change)}
        )
        self.event(node_name, "Warning", "RuntimeSwitchFailed", f"{action} failed (Job {name}): {reason}")

    def _clean_up(self, node_name: str, jobs: Mapping[str, Job]) -> None:
        now = self.clock()
        failed = []
        for name, job in jobs.items():
            outcome, _, finished = job_outcome(job)
            if outcome == "succeeded":
                left = finished + self.options.success_ttl - now
                if left <= 0:
                    self._delete_job(name)
                else:
                    self.queue.add_after(node_name, left + 0.1)
            elif outcome == "failed":
                failed.append((finished, name))
        for _, name in sorted(failed, reverse=True)[self.options.failed_history :]:
            self._delete_job(name)

    # -- API calls -------------------------------------------------------------------------
    def _patch_node(
        self, node: Node, labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None
    ) -> Node:
        metadata: JsonObject = {"resourceVersion": meta(node).get("resourceVersion")}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        try:
            updated = self.http.patch(object_path("v1", "nodes", None, str(meta(node)["name"])), {"metadata": metadata})
        except KubeError as exc:
            if exc.code in (404, 409):
                raise RetryLater(f"node changed meanwhile ({exc.reason})") from exc
            raise
        with self.lock:
            self.nodes[str(meta(node)["name"])] = cast(Node, updated)
        return cast(Node, updated)

    def _delete_job(self, name: str) -> None:
        namespace = self.options.namespace
        try:
            options: DeleteOptions = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
            self.http.delete(object_path("batch/v1", "jobs", namespace, name), options)
        except KubeError as exc:
            if exc.code != 404:
                raise
        pods, _ = self.http.list(object_path("v1", "pods", namespace), {"labelSelector": f"job-name={name}"})
        for pod in pods:
            try:
                self.http.delete(object_path("v1", "pods", namespace, str(meta(pod)["name"])))
            except KubeError as exc:
                if exc.code != 404:
                    raise
        with self.lock:
            self.jobs.pop(name, None)

    def _failure_reason(self, name: str) -> str:
        items, _ = self.http.list(
            object_path("v1", "pods", self.options.namespace), {"labelSelector": f"job-name={name}"}
        )
        messages = []
        for pod in cast(list[Pod], items):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                terminated = (status.get("state") or {}).get("terminated") or {}
                if terminated.get("exitCode") and terminated.get("message"):
                    messages.append(str(terminated["message"]).strip())
        return messages[-1] if messages else ""

    def _uid(self, node: str) -> str:
        with self.lock:
            return str(meta(self.nodes.get(node) or {}).get("uid", node))

    def event(self, node: str, kind: str, reason: str, message: str) -> None:
        involved = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": self._uid(node)}
        now = rfc3339(self.clock())
        post_event(
            self.http, event_body(involved, self.options.event_namespace, CONTROLLER, kind, reason, message, now)
        )


def job_selector() -> str:
    return f"{MANAGED_BY}={CONTROLLER}"
