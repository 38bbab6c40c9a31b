"""Kubernetes objects (`runtimekit.kube.objects`) turned into what the scheduler works with: tasks,
jobs, queues and node metadata. Pure functions; callers: the live cluster cache and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import (
    Node,
    NodeStatus,
    Pod,
    PodGroup,
    PodSpec,
    Queue,
    ResourceList,
    meta,
    object_key,
)
from runtimekit.kube.semantics import nodeaffinity
from runtimekit.kube.semantics.quantity import cpu_milli, memory_bytes, whole_number
from runtimekit.model import (
    Assignment,
    AssignmentError,
    InventoryError,
    NodeCapacity,
    NodeInventory,
    NodeName,
    PodKey,
    PodRequest,
    RequestError,
    hami,
    parse_pod_request,
    selector_from_annotations,
)
from runtimekit.model.scalars import LIMIT, Scalars, scalar_amount, scalars_of
from runtimekit.protocol import KitProtocol
from runtimekit.protocol.memo import PerProtocol
from runtimekit.protocol.names import split_names
from runtimekit.protocol.presets import speaks_hami
from runtimekit.scheduler.framework.info import (
    DEFAULT_QUEUE,
    Constraints,
    JobKey,
    NodeMeta,
    QueueInfo,
    Requirement,
    Resources,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
)
from runtimekit.scheduler.kubesem.draquota import is_dra_key, parse_limits
from runtimekit.scheduler.kubesem.pods import same_spec_but_node

GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
TASK_SPEC = "volcano.sh/task-spec"
TERMINAL_PHASES = ("Succeeded", "Failed")
CRITICAL_PRIORITY = 2_000_000_000


_TIMES: dict[str, float] = {}  # `timestamp`'s, by text: pods created in one second share theirs
_TIMES_KEEP = 1024


def timestamp(text: object) -> float:
    """Seconds since the epoch of an RFC 3339 time; 0 for a missing or unreadable one. Each text is
    parsed once (a bounded memo: every new pod's creationTimestamp is read twice, and a burst of pods
    carries a few distinct ones)."""
    if not isinstance(text, str):
        return parse_rfc3339(text) or 0.0
    found = _TIMES.get(text)
    if found is None:
        found = parse_rfc3339(text) or 0.0
        if len(_TIMES) >= _TIMES_KEEP:
            _TIMES.clear()
        _TIMES[text] = found
    return found


# -- nodes -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeState:
    meta: NodeMeta
    inventory: NodeInventory
    capacity: NodeCapacity
    problem: str = ""  # why the GPU inventory could not be read ("" = fine)
    offered: Scalars = ()  # allocatable scalars for fairness totals: capacity.scalars plus MIG slices


NODE_COUNTED = ("cpu", "memory", "pods")


def node_scalars(allocatable: ResourceList, protocol: KitProtocol) -> tuple[Scalars, Scalars]:
    """A node's scalar resources: (those the fit check books, those fairness counts). The first
    leaves out the kit's GPU resources (the GPU plugins account them); the second adds MIG slices.
    Raises ValueError for an unreadable amount."""
    booked: dict[str, int] = {}
    migs: dict[str, int] = {}
    res = protocol.resources
    for key, value in allocatable.items():
        name = str(key)
        if name in NODE_COUNTED or (protocol.manages(name) and not name.startswith(res.mig_prefix)):
            continue
        amount = scalar_amount(name, value)
        (migs if name.startswith(res.mig_prefix) else booked)[name] = amount
    return scalars_of(booked), scalars_of({**booked, **migs})


def node_state(node: Node, protocol: KitProtocol) -> NodeState:
    m = meta(node)
    name = NodeName(str(m.get("name", "")))
    labels = {str(k): str(v) for k, v in (m.get("labels") or {}).items()}
    annotations = m.get("annotations") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    problem = ""
    offered: Scalars = ()
    try:
        scalars, offered = node_scalars(allocatable, protocol)
        capacity = NodeCapacity(
            cpu_milli(allocatable.get("cpu", 0)),
            memory_bytes(allocatable.get("memory", 0)),
            whole_number(allocatable.get("pods", 110)),
            scalars,
        )
    except ValueError as exc:
        capacity, problem = NodeCapacity(0, 0, 0), f"unreadable allocatable: {exc}"
    text = annotations.get(protocol.annotations.node_devices)
    inventory = NodeInventory(name)
    if text:
        try:
            inventory = NodeInventory.from_annotation(name, str(text))
        except InventoryError as exc:
            problem = str(exc)
    cordon = protocol.annotations.gpus_cordoned
    if cordon and annotations.get(cordon):  # GPUs taking no new pods (HAMi's hami.io/device-cordon)
        inventory = inventory.cordoned(split_names(str(annotations[cordon])))
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    )
    ready = True
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    model = inventory.model or labels.get(protocol.labels.gpu_model, "")
    node_meta = NodeMeta(name, labels, taints, bool(spec.get("unschedulable")), model, ready, node_images(status))
    return NodeState(node_meta, inventory, capacity, problem, offered)


def node_images(status: NodeStatus) -> tuple[tuple[str, int], ...]:
    """status.images as (name, size in bytes), one entry per name (image locality reads them)."""
    out: dict[str, int] = {}
    for image in status.get("images") or []:
        if not isinstance(image, Mapping):
            continue
        size = image.get("sizeBytes")
        size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else 0
        for name in image.get("names") or []:
            out[str(name)] = size
    return tuple(sorted(out.items()))


# -- pods ------------------------------------------------------------------------------------------
def is_terminated(pod: Pod) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_deleting(pod: Pod) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def job_key(pod: Pod) -> tuple[JobKey, bool]:
    """The job a pod belongs to: its PodGroup (namespace/name) or itself; and whether a PodGroup."""
    m = meta(pod)
    annotations = m.get("annotations") or {}
    for key in GROUP_ANNOTATIONS:
        group = annotations.get(key)
        if group:
            return JobKey(f"{m.get('namespace', 'default')}/{group}"), True
    return JobKey(f"pod:{m.get('namespace', 'default')}/{m.get('name', '')}"), False


def constraints(spec: PodSpec) -> Constraints:
    """Where a pod may run, from its spec (nodeSelector, required node affinity as
    `kube.semantics.nodeaffinity` parses it, tolerations, a preset nodeName)."""
    terms = tuple(
        tuple(Requirement(r.key, r.operator, r.values) for r in term) for term in nodeaffinity.required_terms(spec)
    )
    tolerations = tuple(
        Toleration(
            str(t.get("key", "")), str(t.get("operator", "Equal")), str(t.get("value", "")), str(t.get("effect", ""))
        )
        for t in spec.get("tolerations") or []
        if isinstance(t, Mapping)
    )
    return Constraints(nodeaffinity.node_selector_pairs(spec), terms, tolerations, str(spec.get("nodeName") or ""))


_SHARED: dict[bytes, Constraints] = {}  # `shared_constraints`, by what they are read from
_SHARED_KEEP = 4096


def shared_constraints(spec: PodSpec) -> Constraints:
    """`constraints(spec)`, read once per distinct nodeSelector, affinity, tolerations and nodeName
    (their JSON): the pods made from one template share one `Constraints` (immutable). An error is
    raised each time, never kept. Thread-safe (single dict operations: a race reads a spec twice)."""
    try:
        key = jsoncodec.dumps(
            (spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations"), spec.get("nodeName"))
        )
    except TypeError:  # not JSON (a hand-made manifest): read it as it is
        return constraints(spec)
    found = _SHARED.get(key)
    if found is None:
        found = constraints(spec)
        if len(_SHARED) >= _SHARED_KEEP:
            _SHARED.clear()
        _SHARED[key] = found
    return found


def _mapping(value: object) -> Mapping[str, Any]:
    """A field that should hold an object, as one ({} when it holds anything else: a malformed pod)."""
    return value if type(value) is dict or isinstance(value, Mapping) else {}  # a dict, as decoded, at once


def _same_request(before: Pod, after: Pod) -> bool:
    """Whether two manifests of a pod ask for the same resources (its containers, init containers
    and overhead are equal; a pod's later events, a binding or a status, leave them alone)."""
    old, new = _mapping(before.get("spec")), _mapping(after.get("spec"))
    return all(old.get(key) == new.get(key) for key in ("containers", "initContainers", "overhead"))


_WRITES: PerProtocol[None, tuple[frozenset[str], frozenset[str]]] = PerProtocol(16)  # `_binding_writes`
_IDENTITY = ("uid", "name", "namespace", "creationTimestamp", "ownerReferences")


def _only_bound(before: Pod, after: Pod, written: frozenset[str], labeled: frozenset[str] = frozenset()) -> bool:
    """Whether `after` is `before` as its binding leaves it: the same identity, labels and spec but
    for `nodeName`, and the same annotations and labels but for those the scheduler writes with the
    binding (`written`, `labeled`); a status or a resourceVersion may differ (no task field reads them)."""
    old_meta, new_meta = _mapping(before.get("metadata")), _mapping(after.get("metadata"))
    if list(map(old_meta.get, _IDENTITY)) != list(map(new_meta.get, _IDENTITY)):
        return False
    old_labels, new_labels = _mapping(old_meta.get("labels")), _mapping(new_meta.get("labels"))
    if old_labels != new_labels and any(
        old_labels.get(k) != new_labels.get(k) for k in old_labels.keys() | new_labels.keys() if k not in labeled
    ):
        return False
    if not same_spec_but_node(before, after):
        return False
    old_notes, new_notes = _mapping(old_meta.get("annotations")), _mapping(new_meta.get("annotations"))
    blank = dict.fromkeys(written)  # one comparison in C first; the key by key one only when it fails
    if {**old_notes, **blank} == {**new_notes, **blank}:
        return True
    return all(old_notes.get(k) == new_notes.get(k) for k in old_notes.keys() | new_notes.keys() if k not in written)


def _fresh(task: TaskInfo) -> TaskInfo:
    """A copy of `task` with nothing of where it stands (as `task_from_pod` makes one)."""
    out = task.clone()
    out.status, out.node, out.placement, out.nominated = TaskStatus.PENDING, None, None, None
    return out


def _binding_writes(protocol: KitProtocol) -> tuple[frozenset[str], frozenset[str]]:
    """The annotations and labels the scheduler writes with a binding (HAMi's too, under its names)."""
    return _WRITES.get(protocol, None, lambda: _writes_of(protocol))


def _writes_of(protocol: KitProtocol) -> tuple[frozenset[str], frozenset[str]]:
    names = protocol.annotations
    own = frozenset({names.assignment, names.assignment_signature, names.assume_time})
    if not speaks_hami(protocol):
        return own, frozenset()
    return own | hami.BINDING_ANNOTATIONS, frozenset({hami.NODE})


def task_from_pod(pod: Pod, protocol: KitProtocol, like: TaskInfo | None = None) -> TaskInfo:
    """A pod as a task. An unreadable request does not raise: the task carries the reason in
    `invalid`, so the scheduler reports it on the pod instead of dropping the pod. `like`: the task
    of an earlier event of the pod, whose request is taken as it is when the pod asks for the same,
    and whose every field is when the new event is only the pod's binding (what the scheduler reads
    first of every pod it binds)."""
    if like is not None:
        again = rebound(pod, protocol, like)
        if again is not None:
            return again
    m = meta(pod)
    spec = cast(PodSpec, _mapping(pod.get("spec")))
    earlier = like.pod if like is not None and not like.invalid else None  # read by this function
    annotations = _mapping(m.get("annotations"))
    invalid = ""
    if like is not None and earlier is not None and _same_request(earlier, pod):
        request = like.request
    else:
        try:
            request = parse_pod_request(pod, protocol)
        except RequestError as exc:
            request, invalid = PodRequest(0, 0), f"invalid request: {exc}"
    try:
        where = shared_constraints(spec)
    except (AttributeError, TypeError, ValueError) as exc:  # a malformed selector, affinity or toleration
        where, invalid = Constraints(), invalid or f"invalid spec: nodeSelector, affinity or tolerations: {exc}"
    models_text = str(annotations.get(protocol.annotations.gpu_models, "")).strip()
    models = frozenset(m for m in models_text.replace(",", "|").split("|") if m) if models_text else None
    if protocol.rules.model_match != "exact":  # then the selector reads the allowed models, per GPU
        models = None
    job, _ = job_key(pod)
    priority = spec.get("priority")
    priority = priority if isinstance(priority, int) else 0
    return TaskInfo(
        key=PodKey(str(m.get("uid") or object_key(pod))),
        namespace=str(m.get("namespace", "default")),
        name=str(m.get("name", "")),
        job=job,
        request=request,
        priority=priority,
        created=timestamp(m.get("creationTimestamp")),
        policy=pod_policy(annotations, protocol),
        gpu_models=models,
        gpu_select=selector_from_annotations(annotations, protocol),
        invalid=invalid,
        preemptable=preemptable(annotations, _mapping(m.get("labels"))),
        pod=pod,
        constraints=where,
        uid=str(m.get("uid", "")),
        critical=priority >= CRITICAL_PRIORITY
        or spec.get("priorityClassName") in ("system-cluster-critical", "system-node-critical"),
        role=task_role(annotations, _mapping(m.get("labels"))),
    )


def rebound(pod: Pod, protocol: KitProtocol, like: TaskInfo) -> TaskInfo | None:
    """`task_from_pod(pod, protocol, like)` when `pod` is only `like`'s pod as its binding leaves it
    (a fresh copy of `like` with the new manifest and node, no field read again); else None."""
    earlier = like.pod if not like.invalid else None
    if earlier is None or not _only_bound(earlier, pod, *_binding_writes(protocol)):
        return None
    task = _fresh(like)
    task.pod = pod
    node = str(_mapping(pod.get("spec")).get("nodeName") or "")
    if task.constraints.node_name != node:
        task.constraints = replace(task.constraints, node_name=node)
    return task


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def preemptable(annotations: Mapping[str, object], labels: Mapping[str, object]) -> bool:
    """Whether a pod may be evicted for another (`volcano.sh/preemptable`), as Volcano's
    `GetPodPreemptable` reads it: the annotation, else the label, else yes; a value Go's
    `strconv.ParseBool` cannot read means no."""
    for source in (annotations, labels):
        if PREEMPTABLE_ANNOTATION in source:
            return _GO_BOOLS.get(str(source[PREEMPTABLE_ANNOTATION]), False)
    return True


def task_role(annotations: Mapping[str, object], labels: Mapping[str, object]) -> str:
    """A pod's task in its Volcano Job (Volcano's `getTaskRole`): `volcano.sh/task-spec` from its
    annotations, else its labels; "" for none."""
    for source in (annotations, labels):
        role = source.get(TASK_SPEC)
        if isinstance(role, str) and role:
            return role
    return ""


def pod_policy(annotations: Mapping[str, str], protocol: KitProtocol) -> str:
    """The placement policy a pod asks for: the protocol's `annotations.policy` when given, else
    `<node policy>/<GPU policy>` from `annotations.nodePolicy` and `.gpuPolicy` (HAMi's
    `hami.io/node-scheduler-policy` and `hami.io/gpu-scheduler-policy`), a part left empty when its
    annotation is absent; "" for the scheduler's default."""
    names = protocol.annotations
    own = str(annotations.get(names.policy, "")).strip()
    if own:
        return own
    node = str(annotations.get(names.node_policy, "")).strip() if names.node_policy else ""
    gpu = str(annotations.get(names.gpu_policy, "")).strip() if names.gpu_policy else ""
    return f"{node}/{gpu}" if node or gpu else ""


def assignment_of(pod: Pod, protocol: KitProtocol) -> Assignment | None:
    """The scheduler's assignment annotation of a pod, None when absent or unreadable."""
    text = (meta(pod).get("annotations") or {}).get(protocol.annotations.assignment)
    if not text:
        return None
    try:
        return Assignment.from_annotation(str(text))
    except AssignmentError:
        return None


def queue_of(pod: Pod, group: PodGroup | None, default: str = DEFAULT_QUEUE) -> str:
    """The Volcano queue of a pod: its PodGroup's, else its own annotation's, else `default`. `pod` is
    any pod manifest (a task's, as `TaskInfo.pod` holds it)."""
    if group is not None:
        queue = (group.get("spec") or {}).get("queue")
        if queue:
            return str(queue)
    return str((meta(pod).get("annotations") or {}).get(QUEUE_ANNOTATION) or default)


# -- queues ----------------------------------------------------------------------------------------
QUOTA_ONLY = ("requests.", "limits.", "count/")  # quota names, no resource of a node (Volcano skips them too)


def resources_of(amounts: ResourceList | None, protocol: KitProtocol) -> Resources | None:
    """A ResourceList (cpu, memory, GPUs as whole count or core percent, MIG slices and other
    scalar resources by name) as a resource vector; None when absent or unreadable. Quota names
    (`requests.cpu`, `count/pods`: Volcano's job controller writes them into a PodGroup's
    minResources) are not resources and are left out."""
    if not amounts:
        return None
    res = protocol.resources
    try:
        gpu = sum(whole_number(amounts.get(name, 0)) for name in protocol.names("gpu")) * 1000
        gpu += sum(whole_number(amounts.get(name, 0)) for name in protocol.names("core")) * 10
        scalars = {
            str(name): scalar_amount(str(name), value)
            for name, value in amounts.items()
            if name not in NODE_COUNTED
            and not (protocol.manages(str(name)) and not str(name).startswith(res.mig_prefix))
            and not str(name).startswith(QUOTA_ONLY)
        }
        return Resources(
            cpu_milli(amounts.get("cpu", 0)), memory_bytes(amounts.get("memory", 0)), gpu, scalars_of(scalars)
        )
    except ValueError:
        return None


def capability_of(amounts: ResourceList | None, protocol: KitProtocol) -> Resources | None:
    """A queue's capability: what it names is capped, what it does not name is not (Volcano treats
    a missing dimension as infinite); None when absent or unreadable."""
    limit = resources_of(amounts, protocol)
    if limit is None or amounts is None:
        return None
    gpu_names = (*protocol.names("gpu"), *protocol.names("core"))
    return Resources(
        limit.cpu if "cpu" in amounts else LIMIT,
        limit.memory if "memory" in amounts else LIMIT,
        limit.gpu if any(name in amounts for name in gpu_names) else LIMIT,
        limit.scalars,
    )


def queue_info(queue: Queue, protocol: KitProtocol) -> QueueInfo:
    spec = queue.get("spec") or {}
    status = queue.get("status") or {}
    weight = spec.get("weight", 1)
    priority = spec.get("priority")
    guarantee = resources_of((spec.get("guarantee") or {}).get("resource"), protocol)
    capability = spec.get("capability")
    named = [*(capability or {}), *(spec.get("deserved") or {}), *((spec.get("guarantee") or {}).get("resource") or {})]
    return QueueInfo(
        name=str(meta(queue).get("name", "")),
        weight=weight if isinstance(weight, int) and weight > 0 else 1,
        capability=capability_of(capability, protocol),
        guarantee=guarantee or Resources(),
        reclaimable=spec.get("reclaimable") is not False,
        priority=priority if isinstance(priority, int) else 0,
        state=str(status.get("state") or "Open"),
        deserved=resources_of(spec.get("deserved"), protocol),
        parent=str(spec.get("parent") or ""),
        dra_capability=parse_limits(capability),
        has_dra=any(is_dra_key(str(name)) for name in named),
    )
