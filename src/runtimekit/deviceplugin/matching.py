"""Which pod is kubelet's Allocate for? The scheduler → node handoff of ARCHITECTURE §4, as pure functions.

kubelet's Allocate names only device IDs. The container it is for is the one that is
- in a pod bound to this node, neither finished nor being deleted, with an assignment annotation
  for this node and shares for that container that the `AssignmentCheck` accepts (signed by the
  scheduler, equal to the pod's requests),
- asking (limits, else requests) exactly as many devices of this resource as kubelet passes,
- for a MIG resource, assigned exactly that many slices of its profile (GPU, profile, start),
- not yet allocated for this resource (the `annotations.allocated` record, plus what this plugin
  allocated moments ago and the API server may not show yet);
`candidates` lists every such container, oldest pod first (creationTimestamp, then assume time, then
containers in spec order); which of them kubelet is admitting is decided by the service from
kubelet's PodResources (`runtimekit.deviceplugin.admitting`), and only without it by that order.
`preferred_ids` answers GetPreferredAllocation with device IDs on the matched container's assigned
GPUs, so PodResources reports the GPUs the pod really uses. The codec of the allocated annotation
lives here too: `{"version":1,"containers":{"<container>":["<resource>", ...]}}`.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.deviceplugin.authority import AssignmentCheck
from runtimekit.deviceplugin.resources import ResourceKind, by_gpu, gpu_of, target
from runtimekit.kube.objects import Container, Pod, meta
from runtimekit.kube.semantics.quantity import whole_number
from runtimekit.model import Assignment, AssignmentError, GpuShare
from runtimekit.protocol import KitProtocol

FINISHED = frozenset({"Succeeded", "Failed"})
AllocatedKey = tuple[str, str, str]  # (pod uid, container, resource)


@dataclass(frozen=True)
class Candidate:
    """A container that is waiting for this resource."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    container: str
    shares: tuple[GpuShare, ...]
    assume_time: float
    allocated: Mapping[str, tuple[str, ...]]  # the pod's allocated record as read
    gpu_containers: frozenset[str] = frozenset()  # the containers its assignment gives GPUs

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} container {self.container}"


@dataclass(frozen=True)
class NoMatch:
    reason: str


def parse_allocated(text: str | None) -> dict[str, tuple[str, ...]]:
    """The allocated record of a pod: container -> resources already allocated. Bad text reads as empty."""
    return dict(_parse_allocated(text)) if text else {}


@functools.lru_cache(maxsize=4096)
def _parse_allocated(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    try:
        data = json.loads(text)
        containers = data["containers"]
        return tuple((str(c), tuple(str(r) for r in rs)) for c, rs in containers.items())
    except (ValueError, KeyError, TypeError, AttributeError):
        return ()


def encode_allocated(record: Mapping[str, Iterable[str]]) -> str:
    body = {"version": 1, "containers": {c: sorted(set(rs)) for c, rs in sorted(record.items())}}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def parse_assume_time(text: object) -> float:
    """Seconds since the epoch from Unix seconds, ms, µs or ns, or RFC 3339; +inf when unreadable."""
    if text is None:
        return math.inf
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        parsed = parse_rfc3339(raw)
        return math.inf if parsed is None else parsed
    for scale in (1e9, 1e6, 1e3):
        if value > scale * 1e8:  # beyond year 5138 in seconds: a finer unit
            return value / scale
    return value


def container_amount(container: Container, resource: str) -> int:
    """How many devices of `resource` a container asks for (limits, else requests); 0 when none or unreadable."""
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return 0
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    if resource not in amounts:
        return 0
    value = amounts[resource]
    if isinstance(value, str) and value.isdigit():  # the usual case, without the general quantity parser
        return int(value)
    try:
        return max(0, whole_number(value))
    except ValueError:
        return 0


@functools.lru_cache(maxsize=4096)
def _parse_assignment(text: str) -> Assignment | str:
    """The assignment in an annotation, or why it is unreadable (cached: running pods are listed on every call)."""
    try:
        return Assignment.from_annotation(text)
    except AssignmentError as exc:
        return f"unreadable assignment: {exc}"


def _assignment(pod: Pod, node: str, protocol: KitProtocol, check: AssignmentCheck | None = None) -> Assignment | str:
    m = meta(pod)
    spec = pod.get("spec") or {}
    if spec.get("nodeName") != node:
        return "not bound to this node"
    if (pod.get("status") or {}).get("phase") in FINISHED or m.get("deletionTimestamp"):
        return "finished or being deleted"
    text = (m.get("annotations") or {}).get(protocol.annotations.assignment)
    if text is None:
        return "not assigned by the scheduler"
    assignment = _parse_assignment(str(text))
    if isinstance(assignment, str):
        return assignment
    if assignment.node != node:
        return f"assigned to node {assignment.node}"
    problem = check.problem(pod, str(text), assignment) if check is not None else ""
    return problem or assignment


def candidates(
    pods: Iterable[Pod],
    node: str,
    resource: str,
    protocol: KitProtocol,
    recently_allocated: Collection[AllocatedKey] = (),
    cache: MatchCache | None = None,
    check: AssignmentCheck | None = None,
) -> tuple[list[tuple[Candidate, int]], list[str]]:
    """Containers waiting for `resource` with how many devices each asks, oldest first (creation, then
    assume time); and notes on near misses (for error messages)."""
    found: list[tuple[tuple[float, float, str, str, int], Candidate, int]] = []
    notes: list[str] = []
    read = _read_pod if cache is None else cache.read
    for pod in pods:
        waiting, misses = read(pod, node, resource, protocol, check)
        notes.extend(misses)
        for key, candidate, amount in waiting:
            if (candidate.uid, candidate.container, resource) in recently_allocated:
                notes.append(f"{candidate}: already allocated")
            else:
                found.append((key, candidate, amount))
    found.sort(key=lambda item: item[0])
    return [(c, n) for _, c, n in found], notes


_Waiting = tuple[tuple[tuple[float, float, str, str, int], Candidate, int], ...]
_PodCandidates = tuple[_Waiting, tuple[str, ...]]


class MatchCache:
    """What each pod offers to a resource, remembered per pod uid and resourceVersion: a plugin reads the
    same pods on every call, and the API server never changes an object without a new resourceVersion.
    Pods without both are read afresh each time. Thread-safe; one per plugin (uids are per cluster)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str, str, str, int], _PodCandidates] = OrderedDict()
        self._lock = threading.Lock()

    def read(
        self, pod: Pod, node: str, resource: str, protocol: KitProtocol, check: AssignmentCheck | None
    ) -> _PodCandidates:
        m = meta(pod)
        uid, version = str(m.get("uid", "")), str(m.get("resourceVersion", ""))
        if not (uid and version):
            return _read_pod(pod, node, resource, protocol, check)
        key = (uid, version, node, resource, -2 if check is None else check.generation)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        result = _read_pod(pod, node, resource, protocol, check)
        with self._lock:
            self._entries[key] = result
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return result


def _read_pod(
    pod: Pod, node: str, resource: str, protocol: KitProtocol, check: AssignmentCheck | None = None
) -> _PodCandidates:
    """What one pod offers to `resource`: its waiting containers (with sort key and device count) and notes."""
    m = meta(pod)
    prefix = protocol.resources.mig_prefix
    profile = resource[len(prefix) :] if resource.startswith(prefix) else ""
    namespace, name = str(m.get("namespace", "default")), str(m.get("name", ""))
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
    asking = [(i, c) for i, c in enumerate(containers) if container_amount(c, resource) > 0]
    if not asking:
        return (), ()
    assignment = _assignment(pod, node, protocol, check)
    if isinstance(assignment, str):
        return (), (f"{namespace}/{name}: {assignment}",)
    annotations = m.get("annotations") or {}
    record = parse_allocated(annotations.get(protocol.annotations.allocated))
    gpu_containers = frozenset(c for c, shares in assignment.containers.items() if shares)
    assume = parse_assume_time(annotations.get(protocol.annotations.assume_time))
    created = parse_assume_time(m.get("creationTimestamp"))
    uid = str(m.get("uid", ""))
    waiting: list[tuple[tuple[float, float, str, str, int], Candidate, int]] = []
    notes: list[str] = []
    for position, container in asking:
        cname = str(container.get("name", ""))
        if resource in record.get(cname, ()):
            notes.append(f"{namespace}/{name} container {cname}: already allocated")
            continue
        shares = assignment.containers.get(cname, ())
        if not shares:
            notes.append(f"{namespace}/{name} container {cname}: no GPU shares in its assignment")
            continue
        amount = container_amount(container, resource)
        slices = sum(1 for s in shares if s.mig_profile == profile) if profile else amount
        if slices != amount:
            notes.append(f"{namespace}/{name} container {cname}: assigned {slices} {profile} slices, asks {amount}")
            continue
        version = str(m.get("resourceVersion", ""))
        candidate = Candidate(namespace, name, uid, version, cname, shares, assume, record, gpu_containers)
        waiting.append(((created, assume, namespace, name, position), candidate, amount))
    return tuple(waiting), tuple(notes)


def match(
    pods: Iterable[Pod],
    node: str,
    resource: str,
    size: int,
    protocol: KitProtocol,
    recently_allocated: Collection[AllocatedKey] = (),
    cache: MatchCache | None = None,
    check: AssignmentCheck | None = None,
    admitting: Collection[tuple[str, str]] | None = None,
) -> Candidate | NoMatch:
    """The container kubelet's Allocate of `size` devices of `resource` is for, or why there is none.

    `admitting`: the (pod uid, container) pairs kubelet's PodResources shows it is admitting
    (`runtimekit.deviceplugin.admitting`); the match is one of them, the oldest where an older
    kubelet leaves more than one. None: no PodResources, the oldest waiting container of the size."""
    waiting, notes = candidates(pods, node, resource, protocol, recently_allocated, cache, check)
    sized = [c for c, n in waiting if n == size]
    if admitting is not None:
        exact = [c for c in sized if (c.uid, c.container) in admitting]
        if exact:
            return exact[0]
        return NoMatch(_not_admissible(node, resource, size, admitting, pods, notes))
    if sized:
        return sized[0]
    misses = [f"{c} asks {n}" for c, n in waiting] + notes
    detail = f": {'; '.join(misses[:5])}" + (f" (and {len(misses) - 5} more)" if len(misses) > 5 else "")
    return NoMatch(
        f"no pod bound to node {node} is waiting for {size} {resource} (assigned by the scheduler and not yet "
        f"allocated){detail if misses else ''}"
    )


def _not_admissible(
    node: str,
    resource: str,
    size: int,
    admitting: Collection[tuple[str, str]],
    pods: Iterable[Pod],
    notes: Sequence[str],
) -> str:
    """Why the container kubelet is admitting cannot have this Allocate (or that kubelet admits none)."""
    uids = {uid for uid, _ in admitting}
    names = [
        f"{meta(p).get('namespace', 'default')}/{meta(p).get('name', '')}"
        for p in pods
        if str(meta(p).get("uid", "")) in uids
    ]
    if not names:
        return (
            f"kubelet's PodResources shows no pod bound to node {node} being admitted with {size} {resource} "
            "(assigned by the scheduler and not yet allocated)"
        )
    why = [n for n in notes if any(n.startswith(f"{name}:") or n.startswith(f"{name} container") for name in names)]
    reason = "; ".join(why[:3]) or "it is not waiting for these devices (allocated already)"
    pod = ", ".join(sorted(names))
    return f"kubelet is admitting pod {pod} for {size} {resource}, which cannot have them: {reason}"


def _replica_key(device_id: str) -> tuple[str, int, str]:
    gpu, _, replica = device_id.partition("::")
    number = replica.rpartition("::")[2]  # <gpu>::<n>, or <gpu>::<profile>::<n> for dynamic MIG
    return gpu, int(number) if number.isdigit() else -1, device_id


def preferred_ids(
    kind: ResourceKind,
    shares: Sequence[GpuShare],
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
) -> list[str]:
    """`size` IDs from `available` (every `must_include` first) on the GPUs of `shares` where possible.

    With no shares (no matching pod) the IDs are packed onto as few GPUs as possible.
    """
    pool = sorted(set(available) | set(must_include), key=_replica_key)
    chosen = list(dict.fromkeys(must_include))
    taken = set(chosen)
    targets = [target(s) for s in shares]
    if kind in (ResourceKind.GPU, ResourceKind.MIG):
        quotas = dict(Counter(targets))  # a dynamic MIG GPU may hold two slices of the container
    else:
        quotas = {t: size // len(targets) + (1 if i < size % len(targets) else 0) for i, t in enumerate(targets)}
    groups = by_gpu(pool)
    for gpu, quota in quotas.items():
        have = sum(1 for i in chosen if gpu_of(i) == gpu)
        for device_id in groups.get(gpu, []):
            if have >= quota or len(chosen) >= size:
                break
            if device_id not in taken:
                chosen.append(device_id)
                taken.add(device_id)
                have += 1
    if len(chosen) < size:  # fill: GPUs already in use first, then the fullest GPUs (packing)
        used = {gpu_of(i) for i in chosen}
        order = sorted(groups, key=lambda g: (g not in used, -len(groups[g]), g))
        for gpu in order:
            for device_id in groups[gpu]:
                if len(chosen) >= size:
                    break
                if device_id not in taken:
                    chosen.append(device_id)
                    taken.add(device_id)
    return chosen[: max(size, len(must_include))]
