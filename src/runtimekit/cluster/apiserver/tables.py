"""Server-side printing: `meta.k8s.io/v1` Table responses for `kubectl get`.

kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints the columns the
server chooses. Cells that do not depend on the time or on other objects are computed once per
object version, the first time it is printed (`TableMaker.facts`, cached on the version);
`TableMaker.cells` fills in ages and the nodes' GPU ALLOCATED figure (from the pods on each node)
when a table is requested.
Nodes show GPUS (count and model from the node devices annotation) and GPU ALLOCATED (core milli
assigned to the node's non-terminated pods over its GPU capacity); pods show their GPU share; the
default StorageClass is named `<name> (default)`. An assignment that differs from the pod's requests
in what can be told without the node's GPUs (`model.authority.shape_problems`: GPUs per container,
compute shares, MIG profiles) shows as `<refused>` and adds nothing to its node: the scheduler and
the device plugin ignore it. The server holds no assignment key, so signatures are not checked here
(docs/security.md#who-checks-what).
Called through the store (facts) and by the list, get and watch encoders (cells).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from runtimekit.base.timestamps import parse_rfc3339
from runtimekit.cluster.apiserver.printers import UNNAMED, cells_for, columns_for
from runtimekit.cluster.apiserver.printers_base import AGE, NAME, Column, Since, created, get_path, human_duration
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.cluster.apiserver.store import RowFacts
from runtimekit.kube.objects import JsonObject, Node, Pod, StorageClass
from runtimekit.kube.semantics.volumes import is_default_class
from runtimekit.model import Assignment, AssignmentError, InventoryError, NodeInventory, RequestError
from runtimekit.model.authority import shape_problems
from runtimekit.model.request import GpuKind, parse_pod_request
from runtimekit.protocol import KitProtocol

REFUSED = "<refused>"  # the GPU cell of a pod whose assignment differs from its requests


@dataclass(frozen=True)
class NodeAllocation:
    """The GPU ALLOCATED cell of a node: filled in from its pods when the table is built."""

    node: str
    capacity_milli: int


@dataclass(frozen=True)
class DisplayName:
    """The NAME cell when it is not the object's name: kubectl marks the default StorageClass
    `standard (default)`."""

    text: str


@dataclass(frozen=True)
class Unnamed:
    """The extra of a kind whose cells hold the name themselves, where kube puts it (events: last)."""


UNNAMED_ROW = Unnamed()


@dataclass(frozen=True)
class PodGpu:
    """What a pod adds to its node's GPU ALLOCATED: assigned core milli while not terminated."""

    node: str
    milli: int
    terminated: bool


# --- pods ----------------------------------------------------------------------------------------


def _exit_reason(prefix: str, terminated: JsonObject) -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _init_reason(pod: Pod) -> tuple[str | None, int]:
    statuses = get_path(pod, "status", "initContainerStatuses") or []
    total = len(get_path(pod, "spec", "initContainers") or [])
    restarts = 0
    for i, status in enumerate(statuses):
        restarts += int(status.get("restartCount") or 0)
        state = status.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if terminated is not None:
            return _exit_reason("Init:", terminated), restarts
        if waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            return f"Init:{waiting['reason']}", restarts
        return f"Init:{i}/{total}", restarts
    return None, restarts


def pod_status(pod: Pod) -> tuple[str, int, int, int]:
    """(STATUS, ready containers, containers, restarts) as `kubectl get pods` prints them."""
    total = len(get_path(pod, "spec", "containers") or [])
    reason = str(get_path(pod, "status", "reason") or get_path(pod, "status", "phase") or "Pending")
    init, restarts = _init_reason(pod)
    ready = 0
    if init is not None:
        reason = init
    else:
        restarts, running = 0, False
        for status in reversed(get_path(pod, "status", "containerStatuses") or []):
            restarts += int(status.get("restartCount") or 0)
            state = status.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _exit_reason("", terminated)
            elif status.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running"
    if get_path(pod, "metadata", "deletionTimestamp"):
        reason = "Unknown" if get_path(pod, "status", "reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts


# --- GPU columns ---------------------------------------------------------------------------------


class TableMaker:
    """Builds the cells of every kind; holds the protocol (annotation and resource names)."""

    def __init__(self, protocol: KitProtocol, now: Callable[[], float]) -> None:
        self.protocol = protocol
        self.now = now

    # facts: computed once per stored version ------------------------------------------------------

    def facts(self, info: ResourceInfo, obj: JsonObject) -> RowFacts:
        """(cells without NAME, extra) for one object version; ages stay `Since` markers."""
        if info.group == "" and info.kind == "Pod":
            return self._pod_facts(cast(Pod, obj))
        if info.group == "" and info.kind == "Node":
            return self._node_facts(cast(Node, obj))
        if (info.group, info.kind) in UNNAMED:
            return (cells_for(info, obj), UNNAMED_ROW)
        if info.group == "storage.k8s.io" and info.kind == "StorageClass" and is_default_class(cast(StorageClass, obj)):
            return (cells_for(info, obj), DisplayName(f"{get_path(obj, 'metadata', 'name')} (default)"))
        return (cells_for(info, obj), None)

    def _pod_facts(self, pod: Pod) -> RowFacts:
        status, ready, total, restarts = pod_status(pod)
        node = str(get_path(pod, "spec", "nodeName") or "")
        share, milli = self.pod_gpu(pod)
        phase = get_path(pod, "status", "phase")
        cells = (
            f"{ready}/{total}",
            status,
            restarts,
            created(pod),
            str(get_path(pod, "status", "podIP") or "<none>"),
            node or "<none>",
            str(get_path(pod, "status", "nominatedNodeName") or "<none>"),
            _readiness_gates(pod),
            share,
        )
        return (cells, PodGpu(node, milli, phase in ("Succeeded", "Failed")))

    def pod_gpu(self, pod: Pod) -> tuple[str, int]:
        """The GPU cell and the assigned core milli of a pod."""
        text = get_path(pod, "metadata", "annotations", self.protocol.annotations.assignment)
        try:
            request = parse_pod_request(pod, self.protocol)
        except RequestError:
            request = None
        if isinstance(text, str):
            assignment = _assignment(text)
            if assignment is not None and (request is None or shape_problems(assignment, request)):
                return REFUSED, 0  # neither the scheduler nor the device plugin honours it
            return _assignment_cell(text)
        if request is None:
            return "<invalid>", 0
        wanted = [_requested(c.gpu.kind, c.gpu.count, c.gpu.core_milli, c.gpu.mig_profile) for c in request.gpus]
        return (",".join(wanted) + " (requested)" if wanted else "<none>"), 0

    def _node_facts(self, node: Node) -> RowFacts:
        name = str(get_path(node, "metadata", "name") or "")
        gpus, capacity = self.node_gpus(node)
        info = get_path(node, "status", "nodeInfo") or {}
        addresses = {
            a.get("type"): a.get("address")
            for a in get_path(node, "status", "addresses") or []
            if isinstance(a, Mapping)
        }
        cells = (
            _node_status(node),
            _roles(get_path(node, "metadata", "labels") or {}),
            created(node),
            str(info.get("kubeletVersion") or ""),
            str(addresses.get("InternalIP") or "<none>"),
            str(addresses.get("ExternalIP") or "<none>"),
            str(info.get("osImage") or "<unknown>"),
            str(info.get("kernelVersion") or "<unknown>"),
            str(info.get("containerRuntimeVersion") or "<unknown>"),
            gpus,
            NodeAllocation(name, capacity),
        )
        return (cells, None)

    def node_gpus(self, node: Node) -> tuple[str, int]:
        """The GPUS cell and the node's GPU capacity in core milli."""
        name = str(get_path(node, "metadata", "name") or "")
        text = get_path(node, "metadata", "annotations", self.protocol.annotations.node_devices)
        if isinstance(text, str):
            return _inventory_cell(name, text)
        capacity = get_path(node, "status", "capacity", self.protocol.resources.gpu)
        if capacity is not None and str(capacity).isdigit():
            return str(capacity), int(capacity) * 1000
        return "<none>", 0

    # tables: built per request -------------------------------------------------------------------

    def columns(self, info: ResourceInfo) -> list[Column]:
        found = _COLUMNS.get((info.group, info.kind))
        return [NAME, *found] if found is not None else columns_for(info)

    def cells(self, stored_facts: RowFacts, name: str, pods_on_node: Callable[[str], Iterable[PodGpu]]) -> list[Any]:
        cells, extra = stored_facts
        now = self.now()
        out: list[Any] = [] if extra is UNNAMED_ROW else [extra.text if isinstance(extra, DisplayName) else name]
        for cell in cells:
            out.append(self._render(cell, now, pods_on_node))
        return out

    def _render(self, cell: object, now: float, pods_on_node: Callable[[str], Iterable[PodGpu]]) -> Any:
        if isinstance(cell, Since):
            when = parse_rfc3339(cell.timestamp)
            return "<unknown>" if when is None else human_duration(now - when)
        if isinstance(cell, NodeAllocation):
            if not cell.capacity_milli:
                return "<none>"
            used = sum(p.milli for p in pods_on_node(cell.node) if not p.terminated)
            return f"{round(100 * used / cell.capacity_milli)}%"
        return cell


@lru_cache(maxsize=8192)
def _inventory_cell(node: str, text: str) -> tuple[str, int]:
    """Cached by annotation text: node status updates rarely change the inventory."""
    try:
        inventory = NodeInventory.from_annotation(node, text)
    except InventoryError:
        return "<invalid>", 0
    count = len(inventory.gpus)
    return (f"{count}x {inventory.model}" if count else "0"), count * 1000


@lru_cache(maxsize=8192)
def _assignment(text: str) -> Assignment | None:
    """Cached by annotation text: a pod keeps its assignment through most of its updates."""
    try:
        return Assignment.from_annotation(text)
    except AssignmentError:
        return None


@lru_cache(maxsize=8192)
def _assignment_cell(text: str) -> tuple[str, int]:
    assignment = _assignment(text)
    if assignment is None:
        return "<invalid>", 0
    shares = list(assignment.shares())
    cells = [
        f"GPU{s.index}:{s.mig_profile}" if s.mig_profile else f"GPU{s.index}:{s.core_milli / 10:g}%" for s in shares
    ]
    return ",".join(cells) or "<none>", sum(s.core_milli for s in shares if not s.mig_profile)


def _requested(kind: GpuKind, count: int, milli: int, profile: str) -> str:
    if kind is GpuKind.MIG:
        return f"{count}x {profile}" if count > 1 else profile
    if kind is GpuKind.WHOLE:
        return f"{count} GPU" if count == 1 else f"{count} GPUs"
    share = f"{milli / 10:g}%"
    return f"{count}x {share}" if count > 1 else share


def _readiness_gates(pod: Pod) -> str:
    """kube's READINESS GATES: `true/all` of the gates' conditions, `<none>` without gates."""
    gates = [g.get("conditionType") for g in get_path(pod, "spec", "readinessGates") or []]
    if not gates:
        return "<none>"
    true = {c.get("type") for c in get_path(pod, "status", "conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g in true)}/{len(gates)}"


def _node_status(node: Node) -> str:
    ready = next(
        (
            c
            for c in get_path(node, "status", "conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        None,
    )
    status = "Unknown"
    if ready is not None:
        status = {"True": "Ready", "False": "NotReady"}.get(str(ready.get("status")), "Unknown")
    if get_path(node, "spec", "unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _roles(labels: Mapping[str, str]) -> str:
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


_COLUMNS: dict[tuple[str, str], Sequence[Column]] = {
    ("", "Pod"): (
        Column("Ready"),
        Column("Status"),
        Column("Restarts", "integer"),
        AGE,
        Column("IP", priority=1),
        Column("Node", priority=1),
        Column("Nominated Node", priority=1),
        Column("Readiness Gates", priority=1),
        Column(  # the kit's columns come after kube's own, wide ones included
            "GPU",
            description="GPU share from the assignment annotation (<refused> when it differs from the requests), "
            "else the requested GPU resources",
        ),
    ),
    ("", "Node"): (
        Column("Status"),
        Column("Roles"),
        AGE,
        Column("Version"),
        Column("Internal-IP", priority=1),
        Column("External-IP", priority=1),
        Column("OS-Image", priority=1),
        Column("Kernel-Version", priority=1),
        Column("Container-Runtime", priority=1),
        Column("GPUs", description="GPU count and model from the node devices annotation"),
        Column("GPU Allocated", description="core share assigned to running pods, of the node's GPU capacity"),
    ),
}
