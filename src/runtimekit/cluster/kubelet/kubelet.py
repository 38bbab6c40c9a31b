"""The simulated kubelet of one embedded-cluster node: it registers the Node and runs its pods.

`SimulatedKubelet(http, devices, options).start()`:
- registers and keeps current the Node object (`NodeReporter`: Ready condition, capacity and
  allocatable for cpu, memory, pods and the extended resources of `devices`, the node Lease);
- watches the pods bound to the node (`fieldSelector=spec.nodeName=<node>`, through
  `runtimekit.kube.informer`) and admits new ones in creation order, as kubelet does: the resource
  fit check (`OutOf<resource>`), then the devices (`NodeDevices.admit`: the device plugins'
  Allocate, per container and resource); an admitted pod turns Running and the environment its
  containers would get is recorded on it as the annotation
  `ENV_ANNOTATION` (`{"<container>": {"NVIDIA_VISIBLE_DEVICES": …}}`); a rejected pod turns
  Failed with kubelet's reason and message and a Warning Event;
- says why a bound pod has not started while an admission waits on the device plugins (a GPU
  runtime restarting): a Warning Event on the pod being admitted and on each pod behind it, once the
  admission has taken `ADMISSION_SLOW_S` (`admitwatch.py`);
- waits for an admitted pod's volumes (`volumes.py`: its claims Bound, its ConfigMaps and Secrets
  there): meanwhile the pod is Pending with its containers `ContainerCreating` and a Warning
  `FailedMount` Event says why; it is looked at again every `VOLUME_RETRY_S` and runs once ready;
- retries an admitted pod whose DRA claims could not be prepared (`PrepareFailed`, `dradevices.py`),
  as kubelet's pod worker retries a failed sync: Pending, containers `ContainerCreating`, a Warning
  `FailedPrepareDynamicResources` Event (counted up while it repeats), another try every
  `prepare_retry_s`; it runs once its claims are prepared;
- runs the containers as simulations (`containers.py`, `simulate.py`): each starts with kubelet's
  Events (Pulling/Pulled, Created, Started: `messages.py`, in the wording of the server's version),
  one whose command finishes ends with its exit code and is restarted by the pod's `restartPolicy`
  with kubelet's back-off (CrashLoopBackOff, a `BackOff` Event); every container ends after the
  protocol's `annotations.simulatedRuntime`, a `runtimekit …` container when its container runner
  returns (`runner.py`); the pod ends when no container will run again;
- answers the API server's `pods/log` from what each container's run printed (`container_log`);
- reports the health of the devices each container holds (`allocatedResourcesStatus`, KEP-4680:
  `NodeDevices.health`) in every status it writes, and writes a running pod's status again when the
  health of its devices changes;
- frees a pod's devices when it ends or is deleted, then calls `on_pod_stopped` listeners (the
  embedded cluster uses one to let the node runtime reconcile at once);
- carries out graceful deletion: it implements the API server's `KubeletHook` (`manages(node)`),
  so deleting one of its pods only marks it; the kubelet stops its containers (`Killing` Events)
  and deletes it with grace 0;
- lists its running pods, and the pod it is admitting, for the PodResources API (`running_pods()`):
  kubelet adds a pod to its pod manager before admitting it.
All pod handling happens on one worker thread (informer events, runner results and timers are
queued to it), so pod records need no locks beyond the queue's.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtimekit.base.threads import Workers
from runtimekit.base.timestamps import rfc3339
from runtimekit.cluster.apiserver.podlog import ContainerLog
from runtimekit.cluster.kubelet.admission import check_fit, pod_requests, used_by
from runtimekit.cluster.kubelet.admitwatch import AdmissionWatch
from runtimekit.cluster.kubelet.containers import PodContainers
from runtimekit.cluster.kubelet.devicemanager import AdmissionError, PodIdentity
from runtimekit.cluster.kubelet.devices import ContainerEnv, NodeDevices, PrepareFailed
from runtimekit.cluster.kubelet.messages import BACK_OFF, CREATED, KILLING, PULLED, PULLING, STARTED, Wording, pulls
from runtimekit.cluster.kubelet.nodestatus import NodeReporter, NodeShape
from runtimekit.cluster.kubelet.runner import (
    ContainerRunner,
    NodeContext,
    parse_duration,
    run_safely,
    runtimekit_argv,
)
from runtimekit.cluster.kubelet.status import (
    Terminated,
    container_names,
    creating_status,
    lifecycle_status,
    phase_of,
    rejected_status,
    running_status,
    with_resource_health,
)
from runtimekit.cluster.kubelet.volumes import api_reader, unready_volumes
from runtimekit.kube.errors import KubeError
from runtimekit.kube.events import EventRecorder, pod_event_body, record_event
from runtimekit.kube.http import KubeHttp, object_path
from runtimekit.kube.informer import Informer
from runtimekit.kube.objects import (
    Container,
    DeleteOptions,
    JsonObject,
    KubeObject,
    Pod,
    PodStatus,
    annotations_of,
    meta,
)
from runtimekit.protocol import KitProtocol

log = logging.getLogger(__name__)
ENV_ANNOTATION = "runtimekit.aliyun.com/simulated-env"
COMPONENT = "kubelet"
FINISHED = frozenset({"Succeeded", "Failed"})
VOLUME_RETRY_S = 0.5  # a pod waiting for its volumes is looked at again this often
ADMISSION_WATCH_S = 0.5  # how often the admission in progress is looked at (admitwatch.py)


@dataclass(frozen=True)
class KubeletOptions:
    shape: NodeShape
    protocol: KitProtocol = field(default_factory=KitProtocol.default)
    runtime_socket: str | None = None  # the node runtime's socket, for container runners
    work_dir: Path = Path("/tmp")  # container runners' folder (termination logs)
    node_index: int = 0  # pod IPs are 10.244.<index>.<n>
    heartbeat_s: float = 10.0
    report_s: float = 60.0
    poll_s: float = 0.25
    run_s: float = 0.5  # how long a container whose command finishes runs, besides its sleeps
    backoff_s: float = 10.0  # kubelet's first restart back-off (then doubled, up to 5 minutes)
    prepare_retry_s: float = 10.0  # a pod whose claims failed to prepare is synced again (pod worker's backOffPeriod)


@dataclass
class _Pod:
    """A pod this kubelet admitted (or rejected, `finished` from the start)."""

    identity: PodIdentity
    manifest: Pod
    requests: dict[str, int]
    started: str
    finished: bool = False
    env: ContainerEnv = field(default_factory=dict)
    containers: PodContainers | None = None


def _identity(pod: Pod) -> PodIdentity:
    pod_meta = meta(pod)
    return PodIdentity(
        str(pod_meta.get("namespace", "default")), str(pod_meta.get("name", "")), str(pod_meta.get("uid", ""))
    )


class SimulatedKubelet:
    """See the module docstring."""

    def __init__(
        self,
        http: KubeHttp,
        devices: NodeDevices,
        options: KubeletOptions,
        runner: ContainerRunner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.http, self.devices, self.options, self.runner = http, devices, options, runner
        self.node = options.shape.name
        self.clock = clock
        self.reporter = NodeReporter(
            http, options.shape, devices, options.heartbeat_s, options.report_s, options.poll_s, clock
        )
        self.informer = Informer(
            http,
            "/api/v1/pods",
            self._on_pod,
            {"fieldSelector": f"spec.nodeName={self.node}"},
            name=f"{self.node} pods",
        )
        self.on_pod_stopped: list[Callable[[PodIdentity], None]] = []
        self._cond = threading.Condition()
        self._queue: list[tuple[str, Any]] = []
        self._timers: list[tuple[float, int, str, str, str]] = []  # (monotonic due, seq, pod uid, container, action)
        self._seq = itertools.count()
        self._pods: dict[str, _Pod] = {}
        self._deleting: set[str] = set()
        self._ips = itertools.count(2)
        self._waiting: dict[str, tuple[_Pod, str]] = {}  # admitted pods waiting for their volumes, and why
        self._volumes_checked = 0.0
        self._preparing: dict[str, Callable[[Pod], ContainerEnv]] = {}  # pods whose claims are retried
        self.admission = AdmissionWatch()
        self._batch: tuple[list[str], dict[str, Pod], int] = ([], {}, 0)  # being admitted: order, pods, at
        self._workers = Workers(f"kubelet {self.node}")
        self.events = EventRecorder(http, COMPONENT, workers=1, host=self.node)
        self.wording = Wording()
        self._images: set[str] = set()  # pulled on this node
        # uid → (container, reason, message) → the first Event's name, its count, its first time
        self._event_names: dict[str, dict[tuple[str, str, str], tuple[str, int, str]]] = {}
        devices.watch_health(lambda uids: self._put("health", set(uids)))

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> SimulatedKubelet:
        """Register the Node (raises KubeError when refused), then watch and run pods."""
        self.reporter.register()
        try:
            self.wording = Wording.of_version(self.http.get("/version"))
        except KubeError as exc:
            log.info("kubelet %s: no server version (%s): 1.33's Event wording", self.node, exc)
        self.informer.start()
        self._workers.spawn(f"kubelet {self.node} pods", self._work)
        self._workers.spawn(f"kubelet {self.node} status", lambda: self.reporter.run(self._workers.stopping))
        self._workers.every(f"kubelet {self.node} admission watch", ADMISSION_WATCH_S, self._watch_admission)
        return self

    def stop(self) -> None:
        if self._workers.stopped:
            return
        self._workers.stopping.set()
        with self._cond:
            self._cond.notify_all()
        self.informer.stop(1.0)
        self._workers.stop(5.0)
        self.events.close(0.2)  # Events still queued at shutdown are not worth a slower stop

    def synced(self, timeout_s: float) -> bool:
        return self.informer.synced.wait(timeout_s)

    def manages(self, node_name: str) -> bool:
        """The API server's KubeletHook: this kubelet finishes graceful deletion of the node's pods."""
        return node_name == self.node and not self._workers.stopped

    def running_pods(self) -> list[tuple[PodIdentity, Sequence[str]]]:
        """The pods this kubelet runs, with their container names (the PodResources API's view)."""
        with self._cond:
            return [(p.identity, container_names(p.manifest)) for p in self._pods.values() if not p.finished]

    # -- the queue -----------------------------------------------------------------------------
    def _on_pod(self, kind: str, pod: Pod) -> None:
        self._put(kind, pod)

    def _put(self, kind: str, item: Any) -> None:
        with self._cond:
            self._queue.append((kind, item))
            self._cond.notify_all()

    def _next_wait(self) -> float:
        longest = VOLUME_RETRY_S if self._waiting else 1.0
        return min(longest, max(0.0, self._timers[0][0] - time.monotonic())) if self._timers else longest

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._workers.stopped, timeout=self._next_wait())
                if self._workers.stopped:
                    return
                batch, self._queue = self._queue, []
            self._handle(batch)
            self._guarded(self._fire_timers)
            if self._waiting and time.monotonic() - self._volumes_checked >= VOLUME_RETRY_S:
                self._guarded(self._retry_volumes)

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        """One event or pod at a time: a failure is logged and the others still go through."""
        try:
            step(*args)
        except Exception:
            log.exception("kubelet %s: pod handling failed", self.node)

    def _handle(self, batch: list[tuple[str, Any]]) -> None:
        new: dict[str, Pod] = {}
        for kind, item in batch:
            if kind == "container-done":
                self._guarded(self._container_done, *item)
            elif kind == "health":
                self._guarded(self._health_changed, item)
            elif kind == "DELETED":
                new.pop(str(meta(item).get("uid", "")), None)
                self._guarded(self._forget, item)
            else:
                self._guarded(self._observe, item, new)
        arrival = {uid: n for n, uid in enumerate(new)}
        order = sorted(new, key=lambda u: (str(new[u]["metadata"].get("creationTimestamp", "")), arrival[u]))
        for at, uid in enumerate(order):
            with self._cond:
                self._batch = (order, new, at)
            self._guarded(self._admit, new[uid])
        with self._cond:
            self._batch = ([], {}, 0)

    def _observe(self, pod: Pod, new: dict[str, Pod]) -> None:
        identity = _identity(pod)
        known = self._pods.get(identity.uid)
        if pod["metadata"].get("deletionTimestamp"):
            new.pop(identity.uid, None)
            self._delete(pod, known)
        elif known is not None:
            known.manifest = pod
        elif phase_of(pod) == "Running":
            self._adopt(pod)
        elif phase_of(pod) not in FINISHED:
            new[identity.uid] = pod

    # -- admission -----------------------------------------------------------------------------
    def _admit(self, pod: Pod) -> None:
        identity = _identity(pod)
        now = rfc3339(self.clock())
        try:
            requests = pod_requests(pod)
        except ValueError as exc:
            self._reject(pod, AdmissionError("UnexpectedAdmissionError", f"bad resource quantity: {exc}"), now)
            return
        active = [p.requests for p in self._pods.values() if not p.finished]
        problem = check_fit(requests, self.reporter.allocatable(), used_by(active), len(active))
        record = _Pod(identity, pod, requests, now)
        with self._cond:  # known (and listed by PodResources) from before its admission, as in kubelet
            self._pods[identity.uid] = record
        env: ContainerEnv = {}
        self.admission.begin(pod, (name for name in requests if "/" in name))  # extended: a plugin's, maybe
        try:
            if problem is not None:
                raise problem
            env = self.devices.admit(pod)
        except PrepareFailed as exc:
            self._wait_for_claims(record, exc)
            return
        except AdmissionError as exc:
            self._reject(pod, exc, now)
            return
        finally:
            self.admission.end()
        self._admitted(record, env, now)

    def _admitted(self, record: _Pod, env: ContainerEnv, now: str) -> None:
        """Devices (and claims) ready: the pod's volumes, then its containers."""
        identity, pod = record.identity, record.manifest
        record.env = env
        if env:
            self._patch(identity, {"metadata": {"annotations": {ENV_ANNOTATION: json.dumps(env, sort_keys=True)}}})
        if (pod.get("spec") or {}).get("volumes"):
            unready = unready_volumes(pod, api_reader(self.http))
            if unready is not None:
                self._wait_for_volumes(record, unready, now)
                return
        self._run(record)

    def _run(self, record: _Pod) -> None:
        identity, pod, now = record.identity, record.manifest, rfc3339(self.clock())
        ip = f"10.244.{self.options.node_index}.{next(self._ips)}"
        self._start_containers(record)
        assert record.containers is not None
        with self._cond:
            statuses = record.containers.statuses()
        statuses = with_resource_health(statuses, self.devices.health(pod))
        status, ready = running_status(pod, now, self.options.shape.address, ip), lifecycle_status(statuses, None, now)
        status["containerStatuses"] = statuses
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in ("Ready", "ContainersReady")]
        status["conditions"] = kept + (ready.get("conditions") or [])
        self._patch_status(identity, status)
        log.info("kubelet %s: pod %s/%s running", self.node, identity.namespace, identity.name)

    def _wait_for_volumes(self, record: _Pod, problem: str, now: str) -> None:
        """Pending, containers ContainerCreating, a FailedMount Event per new reason."""
        previous = self._waiting.get(record.identity.uid)
        self._waiting[record.identity.uid] = (record, problem)
        if previous is None:
            self._patch_status(record.identity, creating_status(record.manifest, now, self.options.shape.address))
        if previous is None or previous[1] != problem:
            log.info(
                "kubelet %s: pod %s/%s waits for its volumes: %s",
                self.node,
                record.identity.namespace,
                record.identity.name,
                problem,
            )
            involved: KubeObject = {"apiVersion": "v1", "kind": "Pod", "metadata": meta(record.manifest)}
            record_event(self.http, involved, "Warning", "FailedMount", problem, COMPONENT, self.node)

    def _retry_volumes(self) -> None:
        self._volumes_checked = time.monotonic()
        get = api_reader(self.http)
        for uid, (record, _) in list(self._waiting.items()):
            if record.finished or uid not in self._pods:
                del self._waiting[uid]
                continue
            problem = unready_volumes(record.manifest, get)
            if problem is None:
                del self._waiting[uid]
                self._run(record)
            else:
                self._wait_for_volumes(record, problem, rfc3339(self.clock()))

    def _wait_for_claims(self, record: _Pod, failed: PrepareFailed) -> None:
        """Pending, containers ContainerCreating, a FailedPrepareDynamicResources Event (counted up when
        it repeats), and another try after the back-off: kubelet's pod worker retries a failed sync."""
        first = record.identity.uid not in self._preparing
        self._preparing[record.identity.uid] = failed.retry
        if first:
            self._patch_status(
                record.identity, creating_status(record.manifest, record.started, self.options.shape.address)
            )
        log.info(
            "kubelet %s: pod %s/%s: %s", self.node, record.identity.namespace, record.identity.name, failed.message
        )
        self._event(record, "Warning", failed.reason, failed.message, "")
        self._arm(self.options.prepare_retry_s, record.identity.uid, "", "prepare")

    def _retry_claims(self, record: _Pod) -> None:
        retry = self._preparing.get(record.identity.uid)
        if retry is None:
            return
        try:
            env = retry(record.manifest)
        except PrepareFailed as exc:
            self._wait_for_claims(record, exc)
            return
        del self._preparing[record.identity.uid]
        self._admitted(record, env, rfc3339(self.clock()))

    def _watch_admission(self) -> None:
        """Tell the pods that wait on a slow admission why (see `admitwatch.py`)."""
        with self._cond:
            order, batch, at = self._batch
            behind = [batch[uid] for uid in order[at + 1 :]]
            behind += [
                item
                for kind, item in self._queue
                if kind in ("ADDED", "MODIFIED")
                and str(meta(item).get("uid", "")) not in self._pods
                and phase_of(item) not in FINISHED
                and not meta(item).get("deletionTimestamp")
            ]
        for notice in self.admission.overdue(behind):
            involved: KubeObject = {"apiVersion": "v1", "kind": "Pod", "metadata": meta(notice.pod)}
            record_event(self.http, involved, "Warning", notice.reason, notice.message, COMPONENT, self.node)

    def _reject(self, pod: Pod, error: AdmissionError, now: str) -> None:
        identity = _identity(pod)
        with self._cond:
            self._pods[identity.uid] = _Pod(identity, pod, {}, now, finished=True)
        log.info("kubelet %s: pod %s/%s rejected: %s", self.node, identity.namespace, identity.name, error.message)
        self._patch_status(identity, rejected_status(error.reason, error.message, now))
        involved: KubeObject = {"apiVersion": "v1", "kind": "Pod", "metadata": meta(pod)}
        record_event(self.http, involved, "Warning", error.reason, error.message, COMPONENT, self.node)

    def _adopt(self, pod: Pod) -> None:
        """A pod already Running when first seen (the kubelet restarted): keep running it, devices held."""
        identity = _identity(pod)
        started = str((pod.get("status") or {}).get("startTime") or rfc3339(self.clock()))
        try:
            requests = pod_requests(pod)
        except ValueError:
            requests = {}
        record = _Pod(identity, pod, requests, started)
        with self._cond:
            self._pods[identity.uid] = record
        self._start_containers(record, events=False)

    # -- running and finishing -----------------------------------------------------------------
    def _start_containers(self, record: _Pod, events: bool = True) -> None:
        """Start every container (its image pulled first, as kubelet says in Events) and arm the
        timers: the annotation's end for the whole pod, each finishing container's own end."""
        pod = record.manifest
        forever = False
        text = annotations_of(pod).get(self.options.protocol.annotations.simulated_runtime)
        if text:
            try:
                seconds = parse_duration(str(text))
            except ValueError as exc:
                log.warning("pod %s/%s: ignoring %s", record.identity.namespace, record.identity.name, exc)
            else:
                forever = True
                self._arm(seconds, record.identity.uid, "", "pod-end")
        env = {name: dict(values) for name, values in record.env.items()}
        with self._cond:
            record.containers = PodContainers(pod, env, record.identity.name, self.options.backoff_s)
        for container in (pod.get("spec") or {}).get("containers") or []:
            runner = self.runner is not None and runtimekit_argv(container) is not None
            self._start_container(record, container, forever or runner, events)
            if runner:
                threading.Thread(
                    target=self._run_container,
                    args=(pod, container),
                    name=f"container {record.identity.name}/{container.get('name')}",
                    daemon=True,
                ).start()

    def _start_container(self, record: _Pod, container: Container, forever: bool, events: bool = True) -> None:
        assert record.containers is not None
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        if events:
            if pulls(str(container.get("imagePullPolicy") or ""), image, image in self._images):
                self._event(record, "Normal", PULLING, self.wording.pulling(image), name)
                self._event(record, "Normal", PULLED, self.wording.pulled(image), name)
                self._images.add(image)
            else:
                self._event(record, "Normal", PULLED, self.wording.present(image), name)
            self._event(record, "Normal", CREATED, self.wording.created(name), name)
            self._event(record, "Normal", STARTED, self.wording.started(name), name)
        with self._cond:
            run = record.containers.start(name, self.clock(), forever)
        if run.plan.run_s is not None:
            self._arm(self.options.run_s + run.plan.run_s, record.identity.uid, name, "end")

    def _arm(self, seconds: float, uid: str, container: str, action: str) -> None:
        heapq.heappush(self._timers, (time.monotonic() + seconds, next(self._seq), uid, container, action))

    def _event(self, record: _Pod, kind: str, reason: str, message: str, container: str) -> None:
        """An Event about one of the pod's containers (`fieldPath: spec.containers{NAME}`, as kubelet
        writes it); a repeat of one (a restart's) counts up on the first, as kubelet's event correlator
        does, instead of adding an Event per restart."""
        key, seen = (container, reason, message), self._event_names.setdefault(record.identity.uid, {})
        first = seen.get(key)
        body = pod_event_body(record.identity, COMPONENT, kind, reason, message, self.node)
        if container:  # "": about the whole pod
            body["involvedObject"]["fieldPath"] = f"spec.containers{{{container}}}"
        if first is None:
            seen[key] = (body["metadata"]["name"], 1, body["firstTimestamp"])
            self.events.record_body(body)
            return
        name, count, since = first
        seen[key] = (name, count + 1, since)
        body["metadata"]["name"], body["count"], body["firstTimestamp"] = name, count + 1, since
        path = object_path("v1", "events", record.identity.namespace, name)
        try:  # at most once a back-off (10 s and up): written at once
            self.http.patch(path, {"count": count + 1, "lastTimestamp": body["lastTimestamp"]}, "merge")
        except KubeError as exc:
            if exc.code != 404:  # 404: the first is not written yet (or was dropped): write the whole
                log.info("kubelet %s: cannot count event %s up: %s", self.node, name, exc)
                return
            self.events.record_body(body)

    def _context(self) -> NodeContext:
        return NodeContext(
            self.node,
            self.options.runtime_socket,
            self.options.protocol.sockets.runtime,
            self.options.work_dir,
            self.http.server,
        )

    def _run_container(self, pod: Pod, container: Container) -> None:
        assert self.runner is not None
        code, message = run_safely(self.runner, pod, container, self._context())
        self._put("container-done", (_identity(pod).uid, str(container.get("name", "")), Terminated(code, message)))

    def _container_done(self, uid: str, container: str, end: Terminated) -> None:
        record = self._pods.get(uid)
        if record is None or record.finished or record.containers is None:
            return
        self._end_container(record, container, end, final=True)
        self._write_status(record)

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, uid, name, action = heapq.heappop(self._timers)
            record = self._pods.get(uid)
            if action == "prepare" and record is not None and not record.finished:
                self._retry_claims(record)
                continue
            if record is None or record.finished or record.containers is None:
                continue
            if action == "pod-end":
                for container in container_names(record.manifest):
                    self._end_container(record, container, Terminated(0), final=True)
            elif action == "end" and record.containers.running(name):
                self._end_container(record, name, Terminated(record.containers.planned_exit(name)))
            elif action == "start":
                spec = record.containers.containers[name].spec
                self._start_container(record, spec, False)
            self._write_status(record)

    def _end_container(self, record: _Pod, name: str, end: Terminated, final: bool = False) -> None:
        """The container's run ended; kubelet restarts it (at once, or after a back-off) as the pod's
        restartPolicy says."""
        assert record.containers is not None
        with self._cond:
            record.containers.end(name, end, self.clock(), final)
            delay = record.containers.restart_delay(name)
        if delay is None:
            return
        if delay > 0:
            pod_meta = meta(record.manifest)
            identity = record.identity
            message = self.wording.back_off(name, str(pod_meta.get("name", "")), identity.namespace, identity.uid)
            self._event(record, "Warning", BACK_OFF, message, name)
            self._arm(delay, identity.uid, name, "start")
        else:
            self._arm(0.0, record.identity.uid, name, "start")

    def _health_changed(self, uids: set[str]) -> None:
        """Devices some pods hold changed health: their statuses again (kubelet's resource updates)."""
        for uid in sorted(uids):
            record = self._pods.get(uid)
            if record is not None and not record.finished and record.containers is not None:
                self._write_status(record)

    def _write_status(self, record: _Pod) -> None:
        """The containers' statuses; when no container will run again the pod is done and its devices go."""
        assert record.containers is not None
        with self._cond:
            statuses, phase = record.containers.statuses(), record.containers.phase_if_done()
        statuses = with_resource_health(statuses, self.devices.health(record.manifest))
        self._patch_status(record.identity, lifecycle_status(statuses, phase, rfc3339(self.clock())))
        if phase:
            log.info("kubelet %s: pod %s/%s %s", self.node, record.identity.namespace, record.identity.name, phase)
            self._stopped(record)

    def container_log(self, namespace: str, name: str, container: str, previous: bool) -> ContainerLog | None:
        """The API server's `pods/log`: what the container's current (or previous) run printed so far,
        with each line's time, and whether it still runs; None when this kubelet has no such run."""
        with self._cond:
            record = next(
                (p for p in self._pods.values() if (p.identity.namespace, p.identity.name) == (namespace, name)), None
            )
            if record is None or record.containers is None:
                return None
            lines = record.containers.log(container, previous, self.clock())
            running = not previous and record.containers.running(container)
        return None if lines is None else ContainerLog(lines, running)

    def _stopped(self, record: _Pod) -> None:
        with self._cond:
            record.finished = True
        self._preparing.pop(record.identity.uid, None)
        self.admission.forget(record.identity.uid)
        self.devices.release(record.identity.uid)
        for listener in self.on_pod_stopped:
            try:
                listener(record.identity)
            except Exception:
                log.exception("kubelet %s: pod-stopped listener failed", self.node)

    def _kill(self, record: _Pod) -> None:
        """Stop the pod's running containers (SIGTERM: exit code 143), as kubelet says in `Killing` Events."""
        containers = record.containers
        if containers is None:
            return
        names = [name for name in containers.containers if containers.running(name)]
        for name in names:
            self._event(record, "Normal", KILLING, self.wording.killing(name), name)
            with self._cond:
                containers.end(name, Terminated(143), self.clock(), final=True)
        for name in containers.containers:  # a container in back-off is not started again
            with self._cond:
                containers.containers[name].final = True
                containers.containers[name].backoff_s = 0.0
        if names:
            with self._cond:
                statuses = containers.statuses()
            self._patch_status(record.identity, lifecycle_status(statuses, None, rfc3339(self.clock())))

    def _delete(self, pod: Pod, record: _Pod | None) -> None:
        """Graceful deletion: the containers stop at once; then delete the pod with grace 0."""
        identity = _identity(pod)
        if record is not None and not record.finished:
            self._kill(record)
            self._stopped(record)
        if identity.uid in self._deleting:
            return
        self._deleting.add(identity.uid)
        options: DeleteOptions = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": identity.uid},
        }
        try:
            self.http.delete(object_path("v1", "pods", identity.namespace, identity.name), options)
        except KubeError as exc:
            if exc.code not in (404, 409):
                log.warning(
                    "kubelet %s: cannot delete pod %s/%s: %s", self.node, identity.namespace, identity.name, exc
                )

    def _forget(self, pod: Pod) -> None:
        identity = _identity(pod)
        uid = identity.uid or next(
            (
                u
                for u, p in self._pods.items()
                if (p.identity.namespace, p.identity.name) == (identity.namespace, identity.name)
            ),
            "",
        )
        record = self._pods.get(uid)
        if record is not None and not record.finished:
            self._stopped(record)
        self.admission.forget(uid)
        with self._cond:
            self._pods.pop(uid, None)
        self._event_names.pop(uid, None)
        self._deleting.discard(uid)

    # -- API writes ----------------------------------------------------------------------------
    def _patch(self, identity: PodIdentity, body: JsonObject) -> None:
        try:
            self.http.patch(object_path("v1", "pods", identity.namespace, identity.name), body)
        except KubeError as exc:
            log.info("kubelet %s: cannot patch pod %s/%s: %s", self.node, identity.namespace, identity.name, exc)

    def _patch_status(self, identity: PodIdentity, status: PodStatus) -> None:
        path = object_path("v1", "pods", identity.namespace, identity.name, "status")
        try:
            self.http.patch(path, {"metadata": {"uid": identity.uid}, "status": status}, "strategic")
        except KubeError as exc:
            log.info("kubelet %s: cannot update pod %s/%s: %s", self.node, identity.namespace, identity.name, exc)
