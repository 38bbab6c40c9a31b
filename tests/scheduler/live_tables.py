"""Run a Volcano or HAMi table case end to end: its objects created over HTTP on an embedded API
server (priority classes, queues, PodGroups with their status, nodes, then pods, running ones
marked Running), the live scheduler (`build_scheduler`, as `runtimekit scheduler` runs it) started
on the case's conf, and the cluster read back once nothing has changed for a while: which pending
pods were bound where, which pods were deleted (evicted), and the FailedScheduling messages.

Used by the end-to-end table tests (test_peer_tables_live.py) and by scripts/peer_tables.py, which
prints the agreement per table."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.errors import KubeError
from runtimekit.kube.http import KubeHttp
from runtimekit.protocol import KitProtocol
from runtimekit.scheduler.build import AssignmentKeys, SchedulerConfig, build_scheduler
from runtimekit.scheduler.framework import parse_conf
from scheduler.volcano_cases import Case

P = KitProtocol.default()
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"


@dataclass
class Outcome:
    """What the cluster shows once settled."""

    bound: dict[str, str]  # namespace/name -> node, of pods created pending
    evicted: list[str]  # namespace/name of pods created and then deleted or marked for deletion
    reasons: dict[str, list[str]] = field(default_factory=dict)  # pod name -> FailedScheduling messages
    phases: dict[str, str] = field(default_factory=dict)  # namespace/name -> PodGroup phase
    sessions: int = 0
    seconds: float = 0.0


def _create(http: KubeHttp, path: str, body: Mapping[str, Any]) -> None:
    try:
        http.post(path, body)
    except KubeError as exc:
        if exc.code != 409:
            raise


def _pod_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def _for_server(pod: Mapping[str, Any], protocol: KitProtocol) -> dict[str, Any]:
    """The manifest as a client would send it: no UID or creation time (the server sets them), an
    image, and the scheduler name of the protocol under test."""
    meta = {k: v for k, v in pod["metadata"].items() if k not in ("uid", "creationTimestamp")}
    spec = dict(pod["spec"])
    if spec.get("schedulerName") in (P.scheduler_name, None):
        spec["schedulerName"] = protocol.scheduler_name
    spec["containers"] = [{"image": "busybox", **c} for c in spec["containers"]]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def load(http: KubeHttp, case: Case, protocol: KitProtocol = P) -> None:
    """Create the case's objects, in the order informers would list them in Volcano's test."""
    namespaces = {p["metadata"]["namespace"] for p in case.pods} | {g["metadata"]["namespace"] for g in case.groups}
    namespaces |= {c["metadata"]["namespace"] for c in case.claims}
    for ns in sorted(namespaces - {"default"}):
        _create(http, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for pc in case.classes:
        _create(http, "/apis/scheduling.k8s.io/v1/priorityclasses", pc)
    for queue in case.queues:
        name = queue["metadata"]["name"]
        _create(http, f"{VOLCANO}/queues", {k: v for k, v in queue.items() if k != "status"})
        if "status" in queue:
            http.patch(f"{VOLCANO}/queues/{name}/status", {"status": queue["status"]})
    for group in case.groups:
        ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
        _create(http, f"{VOLCANO}/namespaces/{ns}/podgroups", {k: v for k, v in group.items() if k != "status"})
        if "status" in group:
            http.patch(f"{VOLCANO}/namespaces/{ns}/podgroups/{name}/status", {"status": group["status"]})
    for node in case.nodes:
        _create(http, "/api/v1/nodes", {**node, "metadata": {k: v for k, v in node["metadata"].items() if k != "uid"}})
    for device_class in case.device_classes:  # in the order Volcano's test harness makes them
        _create(http, "/apis/resource.k8s.io/v1/deviceclasses", device_class)
    for claim in case.claims:
        _create(http, f"/apis/resource.k8s.io/v1/namespaces/{claim['metadata']['namespace']}/resourceclaims", claim)
    for made in case.slices:
        _create(http, "/apis/resource.k8s.io/v1/resourceslices", made)
    for pod in case.pods:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        http.post(_pod_path(ns), _for_server(pod, protocol))
        phase = pod.get("status", {}).get("phase", "Pending")
        if phase != "Pending":
            http.patch(_pod_path(ns, name) + "/status", {"status": {"phase": phase}})


def _state(http: KubeHttp) -> dict[str, tuple[str, bool]]:
    pods, _ = http.list("/api/v1/pods")
    return {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": (
            str(p["spec"].get("nodeName") or ""),
            bool(p["metadata"].get("deletionTimestamp")),
        )
        for p in pods
    }


def _reasons(http: KubeHttp) -> dict[str, list[str]]:
    events, _ = http.list("/api/v1/events")
    out: dict[str, list[str]] = {}
    for e in events:
        if e.get("reason") == "FailedScheduling":
            out.setdefault(e["involvedObject"]["name"], []).append(str(e.get("message", "")))
    return out


def with_allocate(conf: str) -> str:
    """The conf with `allocate` first among its actions when it lacks it: Volcano's action tables run
    one session of one action, but on a cluster the pods a preempt or reclaim pipelines are bound by
    allocate in a later session; a conf without it leaves them pending, and each session then
    preempts again for them (as Volcano would: its preempt takes no account of pods it pipelined
    before)."""
    match = re.search(r'actions:\s*"([^"]*)"', conf)
    if match is None or "allocate" in [a.strip() for a in match.group(1).split(",")]:
        return conf
    return conf[: match.start(1)] + "allocate, " + conf[match.start(1) :]


def _settle(http: KubeHttp, quiet: float, deadline: float) -> None:
    """Return once the pods have not changed for `quiet` seconds (or at the deadline)."""
    last, changed = _state(http), time.monotonic()
    while time.monotonic() - changed < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        now = _state(http)
        if now != last:
            last, changed = now, time.monotonic()


def _phases(http: KubeHttp) -> dict[str, str]:
    groups, _ = http.list(f"{VOLCANO}/podgroups")
    return {
        f"{g['metadata']['namespace']}/{g['metadata']['name']}": str((g.get("status") or {}).get("phase", ""))
        for g in groups
    }


def run_live(
    server: ApiServer,
    case: Case,
    protocol: KitProtocol = P,
    quiet: float = 0.6,
    timeout: float = 20.0,
    later: Sequence[Sequence[Mapping[str, Any]]] = (),
) -> Outcome:
    """Load the case, run the scheduler until the pods have not changed for `quiet` seconds (unschedulable
    pods are retried every 0.2 s meanwhile, so later sessions may act on what earlier ones did), then
    for each batch of `later` pods create them and wait again; stop the scheduler. The outcome's
    binds are those of pods created pending (the case's and the later ones)."""
    http = KubeHttp.connect(server=server.url)
    try:
        load(http, case, protocol)
        start = _state(http)
        pending = {key for key, (node, _) in start.items() if not node}
        started = time.monotonic()
        config = SchedulerConfig(
            kube=http,
            conf=parse_conf(with_allocate(case.conf)),
            protocol=protocol,
            keys=AssignmentKeys(required=False),
            period=0.02,
            idle_wakeup=0.2,
            retry_seconds=0.2,
            bind_workers=2,
        )
        scheduler = build_scheduler(config).start()
        try:
            if not scheduler.synced(10):
                raise TimeoutError("the scheduler's informers did not sync")
            _settle(http, quiet, started + timeout)
            for batch in later:
                for pod in batch:
                    http.post(_pod_path(pod["metadata"]["namespace"]), _for_server(pod, protocol))
                    pending.add(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
                _settle(http, quiet, time.monotonic() + timeout)
            sessions = scheduler.sessions
        finally:
            scheduler.stop()
        end = _state(http)
        bound = {key: end[key][0] for key in sorted(pending) if key in end and end[key][0]}
        evicted = sorted(key for key, (node, _) in start.items() if node and (key not in end or end[key][1]))
        return Outcome(bound, evicted, _reasons(http), _phases(http), sessions, time.monotonic() - started)
    finally:
        http.close()


@dataclass(frozen=True)
class Row:
    """One table case with Volcano's (or HAMi's) expectation: `binds` compared when given (pods
    created pending that end bound, and where), `evicted` when given; `missing` names a feature the
    kit does not have, for a case counted apart."""

    table: str
    case: Case
    binds: Mapping[str, str] | None = None
    evicted: Sequence[str] | None = None
    missing: str = ""
    protocol: KitProtocol = P
    later: Sequence[Sequence[Mapping[str, Any]]] = ()  # pods created in batches once the cluster settled
    check: Callable[[Outcome], str] | None = None  # a further check: "" when it holds, else why not

    @property
    def name(self) -> str:
        return self.case.name

    def disagreement(self, got: Outcome) -> str:
        """Why the outcome differs from the expectation ("" when it agrees)."""
        why = []
        if self.binds is not None and dict(got.bound) != dict(self.binds):
            why.append(f"binds {got.bound}, expected {dict(self.binds)}")
        if self.evicted is not None and sorted(got.evicted) != sorted(self.evicted):
            why.append(f"evicted {got.evicted}, expected {sorted(self.evicted)}")
        if self.check is not None and (more := self.check(got)):
            why.append(more)
        return "; ".join(why)

    def lost(self, got: Outcome) -> list[str]:
        """Pods evicted that the expectation keeps running."""
        if self.evicted is None:
            return list(got.evicted)
        return sorted(set(got.evicted) - set(self.evicted))
