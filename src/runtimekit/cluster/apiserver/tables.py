"""Server-side printing: `meta.k8s.io/v1` Table responses for `kubectl get`.

kubectl asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints the columns the
server chooses. Cells that do not depend on the time or on other objects are computed once per
object version, the first time it is printed (`TableMaker.facts`, cached on the version);
`TableMaker.cells` fills in ages and the nodes' GPU ALLOCATED figure (from the pods on each node)
when a table is requested.
Nodes show GPUS (count and model from the node devices annotation) and GPU ALLOCATED (core milli
assigned to the node's non-terminated pods over its GPU capacity); pods show their GPU share.
Called through the store (facts) and by the list, get and watch encoders (cells).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from runtimekit.cluster.apiserver.resources import PrinterColumn, ResourceInfo
from runtimekit.model import Assignment, AssignmentError, InventoryError, NodeInventory, RequestError
from runtimekit.model.request import GpuKind, parse_pod_request
from runtimekit.protocol import Protocol

Obj = Mapping[str, Any]
NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically."
)


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Since:
    """A cell shown as the time elapsed since `timestamp` (kubectl's AGE and LAST SEEN)."""

    timestamp: str


@dataclass(frozen=True)
class NodeAllocation:
    """The GPU ALLOCATED cell of a node: filled in from its pods when the table is built."""

    node: str
    capacity_milli: int


@dataclass(frozen=True)
class PodGpu:
    """What a pod adds to its node's GPU ALLOCATED: assigned core milli while not terminated."""

    node: str
    milli: int
    terminated: bool


NAME = Column("Name", format="name", description=NAME_DESCRIPTION)
AGE = Column(
    "Age", description="CreationTimestamp is a timestamp representing the server time when this object was created."
)


def human_duration(seconds: float) -> str:
    """apimachinery's `duration.HumanDuration`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y" if days % 365 == 0 else f"{years}y{days % 365}d"
    return f"{years}y"


def parse_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):  # objects come from JSON: dicts (cheaper to test than Mapping)
            return None
        obj = obj.get(part)
    return obj


def _created(obj: Obj) -> Since:
    return Since(str(_get(obj, "metadata", "creationTimestamp") or ""))


# --- pods ----------------------------------------------------------------------------------------


def _exit_reason(prefix: str, terminated: Obj) -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _init_reason(pod: Obj) -> tuple[str | None, int]:
    statuses = _get(pod, "status", "initContainerStatuses") or []
    total = len(_get(pod, "spec", "initContainers") or [])
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


def pod_status(pod: Obj) -> tuple[str, int, int, int]:
    """(STATUS, ready containers, containers, restarts) as `kubectl get pods` prints them."""
    total = len(_get(pod, "spec", "containers") or [])
    reason = str(_get(pod, "status", "reason") or _get(pod, "status", "phase") or "Pending")
    init, restarts = _init_reason(pod)
    ready = 0
    if init is not None:
        reason = init
    else:
        restarts, running = 0, False
        for status in reversed(_get(pod, "status", "containerStatuses") or []):
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
    if _get(pod, "metadata", "deletionTimestamp"):
        reason = "Unknown" if _get(pod, "status", "reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts


# --- GPU columns ---------------------------------------------------------------------------------


class TableMaker:
    """Builds the cells of every kind; holds the protocol (annotation and resource names)."""

    def __init__(self, protocol: Protocol, now: Callable[[], float]) -> None:
        self.protocol = protocol
        self.now = now

    # facts: computed once per stored version ------------------------------------------------------

    def facts(self, info: ResourceInfo, obj: Obj) -> tuple[object, ...]:
        """(cells without NAME, extra) for one object version; ages stay `Since` markers."""
        builder = _CELLS.get((info.group, info.kind))
        if builder is not None:
            return builder(self, obj)
        if info.printer_columns:
            return (tuple(_printer_cell(c, obj) for c in info.printer_columns), None)
        return ((_created(obj),), None)

    def _pod_facts(self, pod: Obj) -> tuple[object, ...]:
        status, ready, total, restarts = pod_status(pod)
        node = str(_get(pod, "spec", "nodeName") or "")
        share, milli = self.pod_gpu(pod)
        phase = _get(pod, "status", "phase")
        cells = (
            f"{ready}/{total}",
            status,
            restarts,
            _created(pod),
            str(_get(pod, "status", "podIP") or "<none>"),
            node or "<none>",
            share,
            str(_get(pod, "status", "nominatedNodeName") or "<none>"),
        )
        return (cells, PodGpu(node, milli, phase in ("Succeeded", "Failed")))

    def pod_gpu(self, pod: Obj) -> tuple[str, int]:
        """The GPU cell and the assigned core milli of a pod."""
        text = _get(pod, "metadata", "annotations", self.protocol.annotations.assignment)
        if isinstance(text, str):
            return _assignment_cell(text)
        try:
            request = parse_pod_request(pod, self.protocol)
        except RequestError:
            return "<invalid>", 0
        wanted = [_requested(c.gpu.kind, c.gpu.count, c.gpu.core_milli, c.gpu.mig_profile) for c in request.gpus]
        return (",".join(wanted) + " (requested)" if wanted else "<none>"), 0

    def _node_facts(self, node: Obj) -> tuple[object, ...]:
        name = str(_get(node, "metadata", "name") or "")
        gpus, capacity = self.node_gpus(node)
        info = _get(node, "status", "nodeInfo") or {}
        addresses = {
            a.get("type"): a.get("address") for a in _get(node, "status", "addresses") or [] if isinstance(a, Mapping)
        }
        cells = (
            _node_status(node),
            _roles(_get(node, "metadata", "labels") or {}),
            _created(node),
            str(info.get("kubeletVersion") or ""),
            gpus,
            NodeAllocation(name, capacity),
            str(addresses.get("InternalIP") or "<none>"),
            str(addresses.get("ExternalIP") or "<none>"),
            str(info.get("osImage") or "<unknown>"),
            str(info.get("kernelVersion") or "<unknown>"),
            str(info.get("containerRuntimeVersion") or "<unknown>"),
        )
        return (cells, None)

    def node_gpus(self, node: Obj) -> tuple[str, int]:
        """The GPUS cell and the node's GPU capacity in core milli."""
        name = str(_get(node, "metadata", "name") or "")
        text = _get(node, "metadata", "annotations", self.protocol.annotations.node_devices)
        if isinstance(text, str):
            return _inventory_cell(name, text)
        capacity = _get(node, "status", "capacity", self.protocol.resources.gpu)
        if capacity is not None and str(capacity).isdigit():
            return str(capacity), int(capacity) * 1000
        return "<none>", 0

    # tables: built per request -------------------------------------------------------------------

    def columns(self, info: ResourceInfo) -> list[Column]:
        found = _COLUMNS.get((info.group, info.kind))
        if found is not None:
            return [NAME, *found]
        if info.printer_columns:
            return [NAME, *(_printer_column(c) for c in info.printer_columns)]
        return [NAME, AGE]

    def cells(
        self, stored_facts: tuple[object, ...], name: str, pods_on_node: Callable[[str], Iterable[PodGpu]]
    ) -> list[Any]:
        cells, _extra = stored_facts
        now = self.now()
        out: list[Any] = [name]
        for cell in cells:  # type: ignore[attr-defined]
            out.append(self._render(cell, now, pods_on_node))
        return out

    def _render(self, cell: object, now: float, pods_on_node: Callable[[str], Iterable[PodGpu]]) -> Any:
        if isinstance(cell, Since):
            when = parse_time(cell.timestamp)
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
def _assignment_cell(text: str) -> tuple[str, int]:
    """Cached by annotation text: a pod keeps its assignment through most of its updates."""
    try:
        assignment = Assignment.from_annotation(text)
    except AssignmentError:
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


def _node_status(node: Obj) -> str:
    ready = next(
        (c for c in _get(node, "status", "conditions") or [] if isinstance(c, Mapping) and c.get("type") == "Ready"),
        None,
    )
    status = "Unknown"
    if ready is not None:
        status = {"True": "Ready", "False": "NotReady"}.get(str(ready.get("status")), "Unknown")
    if _get(node, "spec", "unschedulable"):
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


# --- other kinds ---------------------------------------------------------------------------------


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (Mapping, list)) else 0


def _ports(spec: Obj) -> str:
    ports = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    return ",".join(ports) or "<none>"


def _job_status(job: Obj) -> str:
    for condition in _get(job, "status", "conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed", "Suspended"):
            return str(condition["type"])
    return "Running"


def _event_object(event: Obj) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_time(event: Obj) -> Since:
    return Since(
        str(event.get("lastTimestamp") or event.get("eventTime") or _get(event, "metadata", "creationTimestamp") or "")
    )


def _status_count(field: str) -> Callable[[Obj], object]:
    return lambda obj: int(_get(obj, "status", field) or 0)


def _simple(*cells: Callable[[Obj], object]) -> Callable[[TableMaker, Obj], tuple[object, ...]]:
    def build(_maker: TableMaker, obj: Obj) -> tuple[object, ...]:
        return (tuple(cell(obj) for cell in cells), None)

    return build


_CELLS: dict[tuple[str, str], Callable[[TableMaker, Obj], tuple[object, ...]]] = {
    ("", "Pod"): TableMaker._pod_facts,
    ("", "Node"): TableMaker._node_facts,
    ("", "Namespace"): _simple(lambda o: str(_get(o, "status", "phase") or ""), _created),
    ("", "ConfigMap"): _simple(lambda o: _count(o.get("data")) + _count(o.get("binaryData")), _created),
    ("", "Secret"): _simple(lambda o: str(o.get("type") or ""), lambda o: _count(o.get("data")), _created),
    ("", "ServiceAccount"): _simple(lambda o: _count(o.get("secrets")), _created),
    ("", "Service"): _simple(
        lambda o: str(_get(o, "spec", "type") or ""),
        lambda o: str(_get(o, "spec", "clusterIP") or "<none>"),
        lambda o: ",".join(_get(o, "spec", "externalIPs") or []) or "<none>",
        lambda o: _ports(o.get("spec") or {}),
        _created,
    ),
    ("", "Event"): _simple(
        _event_time,
        lambda o: str(o.get("type") or ""),
        lambda o: str(o.get("reason") or ""),
        _event_object,
        lambda o: str(o.get("message") or ""),
    ),
    ("apps", "Deployment"): _simple(
        lambda o: f"{_get(o, 'status', 'readyReplicas') or 0}/{_get(o, 'spec', 'replicas') or 0}",
        lambda o: int(_get(o, "status", "updatedReplicas") or 0),
        lambda o: int(_get(o, "status", "availableReplicas") or 0),
        _created,
    ),
    ("apps", "DaemonSet"): _simple(
        *(
            _status_count(f)
            for f in (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "updatedNumberScheduled",
                "numberAvailable",
            )
        ),
        lambda o: (
            ",".join(f"{k}={v}" for k, v in (_get(o, "spec", "template", "spec", "nodeSelector") or {}).items())
            or "<none>"
        ),
        _created,
    ),
    ("batch", "Job"): _simple(
        _job_status,
        lambda o: f"{_get(o, 'status', 'succeeded') or 0}/{_get(o, 'spec', 'completions') or 1}",
        _created,
    ),
    ("coordination.k8s.io", "Lease"): _simple(lambda o: str(_get(o, "spec", "holderIdentity") or "<none>"), _created),
    ("scheduling.k8s.io", "PriorityClass"): _simple(
        lambda o: int(o.get("value") or 0), lambda o: bool(o.get("globalDefault") or False), _created
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _simple(
        lambda o: str(_get(o, "metadata", "creationTimestamp") or "")
    ),
}
_COLUMNS: dict[tuple[str, str], Sequence[Column]] = {
    ("", "Pod"): (
        Column("Ready"),
        Column("Status"),
        Column("Restarts", "integer"),
        AGE,
        Column("IP", priority=1),
        Column("Node"),
        Column("GPU", description="GPU share from the assignment annotation, else the requested GPU resources"),
        Column("Nominated Node", priority=1),
    ),
    ("", "Node"): (
        Column("Status"),
        Column("Roles"),
        AGE,
        Column("Version"),
        Column("GPUs", description="GPU count and model from the node devices annotation"),
        Column("GPU Allocated", description="core share assigned to running pods, of the node's GPU capacity"),
        Column("Internal-IP", priority=1),
        Column("External-IP", priority=1),
        Column("OS-Image", priority=1),
        Column("Kernel-Version", priority=1),
        Column("Container-Runtime", priority=1),
    ),
    ("", "Namespace"): (Column("Status"), AGE),
    ("", "ConfigMap"): (Column("Data", "integer"), AGE),
    ("", "Secret"): (Column("Type"), Column("Data", "integer"), AGE),
    ("", "ServiceAccount"): (Column("Secrets", "integer"), AGE),
    ("", "Service"): (Column("Type"), Column("Cluster-IP"), Column("External-IP"), Column("Port(s)"), AGE),
    ("", "Event"): (Column("Last Seen"), Column("Type"), Column("Reason"), Column("Object"), Column("Message")),
    ("apps", "Deployment"): (Column("Ready"), Column("Up-to-date", "integer"), Column("Available", "integer"), AGE),
    ("apps", "DaemonSet"): (
        *(Column(n, "integer") for n in ("Desired", "Current", "Ready", "Up-to-date", "Available")),
        Column("Node Selector"),
        AGE,
    ),
    ("batch", "Job"): (Column("Status"), Column("Completions"), AGE),
    ("coordination.k8s.io", "Lease"): (Column("Holder"), AGE),
    ("scheduling.k8s.io", "PriorityClass"): (Column("Value", "integer"), Column("Global-Default", "boolean"), AGE),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (Column("Created At", format="date"),),
}


# --- CRD printer columns ------------------------------------------------------------------------

_PATH_PART = re.compile(r"\.((?:[^.\[\\]|\\.)+)|\[(\d+)\]")


def json_path(obj: Any, path: str) -> Any:
    """Evaluate a simple JSONPath (`.a.b[0].c`, `\\.` escapes a dot in a key); None when absent."""
    node = obj
    for match in _PATH_PART.finditer(path.strip().removeprefix("{").removesuffix("}")):
        key, index = match.group(1), match.group(2)
        if key is not None:
            node = node.get(key.replace("\\.", ".")) if isinstance(node, Mapping) else None
        else:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
        if node is None:
            return None
    return node


def _printer_cell(column: PrinterColumn, obj: Obj) -> object:
    value = json_path(obj, column.json_path)
    if column.type == "date":
        return Since(str(value or ""))
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def _printer_column(column: PrinterColumn) -> Column:
    return Column(column.name, column.type, column.priority, column.format, column.description)
