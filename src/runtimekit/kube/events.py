"""Kubernetes Events: the one builder of core/v1 Event bodies (`event_body`, `object_reference`), a
best-effort writer for callers that write few (`record_event`, `post_event`: the controller, the
embedded kubelet and Job controller), and `EventRecorder` for callers that write many.

`EventRecorder` writes off the caller's path, as client-go's event broadcaster does for
kube-scheduler: a bounded queue drained by a few threads. A binding does not wait for its `Scheduled` event, so a bind
worker spends one API round trip per pod, not two. Events are also limited in rate (a token bucket,
`qps` with bursts up to `burst`, as kube-scheduler's API client is by `--kube-api-qps/-burst`), so
that under a flood of pods the scheduler's CPU goes to binding them rather than to describing it.
An event over the rate, or one that finds the queue full, is dropped and counted (an Event is advice
for people, not state anything depends on); a failed POST is logged.
Callers of the recorder: `KubeBinder` (the live scheduler).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, cast

from runtimekit.base.threads import Workers
from runtimekit.base.timestamps import rfc3339
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.objects import Event, EventSource, ObjectReference, meta

log = logging.getLogger(__name__)
DEFAULT_QPS = 50.0  # kube-scheduler's --kube-api-qps and --kube-api-burst defaults
DEFAULT_BURST = 100


class ObjectRef(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> str: ...


def object_reference(obj: Mapping[str, object]) -> dict[str, str]:
    """The `involvedObject` of an Event about `obj`, a whole object of any kind (apiVersion, kind,
    metadata): its apiVersion, kind, name, and namespace and uid where it has them."""
    m = meta(obj)
    ref = {"apiVersion": str(obj.get("apiVersion") or "v1"), "kind": str(obj.get("kind", "")), "name": ""}
    for key, value in (("namespace", m.get("namespace")), ("name", m.get("name")), ("uid", m.get("uid"))):
        if value:
            ref[key] = str(value)
    return ref


_LAST_NS = [0]
_NS_LOCK = threading.Lock()


def _unique_ns() -> int:
    """Nanoseconds since the epoch, strictly increasing in this process. An Event is named
    `<object>.<these in hex>` as client-go names it, so listing (sorted by name) gives one object's
    Events in the order they happened, which `kubectl describe` keeps for Events of the same second."""
    with _NS_LOCK:
        _LAST_NS[0] = max(time.time_ns(), _LAST_NS[0] + 1)
        return _LAST_NS[0]


def event_body(
    involved: Mapping[str, str],
    namespace: str,
    component: str,
    kind: str,
    reason: str,
    message: str,
    now: str = "",
    host: str = "",
) -> Event:
    """A core/v1 Event of type `kind` (Normal, Warning) in `namespace` about `involved` (its
    apiVersion, kind, name, and uid and namespace where it has them: an `ObjectReference`'s fields),
    from `component` on `host` (a node name, for a kubelet); `now` defaults to the current time.
    Messages are cut at 1024."""
    now = now or rfc3339()
    source: EventSource = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{_unique_ns():x}", "namespace": namespace},
        "involvedObject": cast(ObjectReference, dict(involved)),
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": source,
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def post_event(http: KubeHttp, body: Event) -> bool:
    """Write an Event, best effort as in Kubernetes: a refusal is logged and dropped. True if written."""
    try:
        http.post(object_path("v1", "events", body["metadata"]["namespace"]), dict(body))
    except KubeError as exc:
        involved = body["involvedObject"]
        log.info("could not record event %s on %s %s: %s", body["reason"], involved["kind"], involved["name"], exc)
        return False
    return True


def record_event(
    http: KubeHttp, involved: Mapping[str, object], kind: str, reason: str, message: str, component: str, host: str = ""
) -> None:
    """`post_event` an Event about `involved` (a whole object), in its namespace (else `default`)."""
    ref = object_reference(involved)
    body = event_body(ref, ref.get("namespace", "default"), component, kind, reason, message, host=host)
    post_event(http, body)


def pod_event_body(ref: ObjectRef, component: str, kind: str, reason: str, message: str, host: str = "") -> Event:
    """A core/v1 Event about a pod, in the pod's namespace (`host`: the node of a kubelet's Event)."""
    involved = {"apiVersion": "v1", "kind": "Pod", "namespace": ref.namespace, "name": ref.name, "uid": ref.uid}
    return event_body(involved, ref.namespace, component, kind, reason, message, host=host)


class TokenBucket:
    """`qps` tokens a second, holding at most `burst`; `take()` spends one if there is one.
    `qps <= 0` means no limit."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self._clock = qps, max(1, burst), clock
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        if self.qps <= 0:
            return True
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


class EventRecorder:
    """`record()` queues an Event and returns at once; `flush()` waits for the queue to drain."""

    def __init__(
        self,
        http: KubeHttp,
        component: str,
        capacity: int = 1000,
        workers: int = 2,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        host: str = "",
    ) -> None:
        self.http, self.component, self.host = http, component, host
        self._queue: queue.Queue[Event | None] = queue.Queue(capacity)
        self._rate = TokenBucket(qps, burst)
        self.dropped = 0  # the queue was full
        self.throttled = 0  # over the rate
        self.failed = 0
        self._workers = Workers("events")
        self._drainers = max(1, workers)
        for i in range(self._drainers):
            self._workers.spawn(f"events-{i}", self._drain)

    def record(self, ref: ObjectRef, kind: str, reason: str, message: str) -> None:
        # the rate first: over it (a flood of bindings), the Event is not even built
        if self._admitted():
            self._put(pod_event_body(ref, self.component, kind, reason, message, self.host))

    def record_body(self, body: Event) -> None:
        """Queue an Event the caller built (`pod_event_body`, with fields of its own)."""
        if self._admitted():
            self._put(body)

    def _admitted(self) -> bool:
        """Whether an Event is within the rate (one over it is counted, and logged now and then)."""
        if self._rate.take():
            return True
        self.throttled += 1
        if self.throttled == 1 or self.throttled % 1000 == 0:
            log.warning("events over %g/s: %d dropped so far", self._rate.qps, self.throttled)
        return False

    def _put(self, body: Event) -> None:
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full: %d events dropped so far", self.dropped)

    def _drain(self) -> None:
        while (body := self._queue.get()) is not None:
            try:
                self.http.post(object_path("v1", "events", body["metadata"]["namespace"]), body)
            except Exception as exc:
                self.failed += 1
                log.info("could not record %s on %s: %s", body["reason"], body["involvedObject"]["name"], exc)
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued event is written (or given up); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within `timeout`), then stop the threads."""
        self.flush(timeout)
        for _ in range(self._drainers):  # one end mark per drainer: each takes one and returns
            try:
                self._queue.put(None, timeout=1.0)
            except queue.Full:
                break
        self._workers.stop(1.0)
