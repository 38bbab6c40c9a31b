"""Generic server-side printing: table columns and cells of the kinds without GPU columns, ages,
and CustomResourceDefinition `additionalPrinterColumns` (a simple JSONPath).

`cells_for`/`columns_for` give kubectl the columns it shows for namespaces, configmaps, services,
events, deployments, replica sets, stateful sets, controller revisions, jobs, leases, priority classes,
CRDs and custom resources; every other kind gets NAME and AGE. Cells that depend on the time are
`Since` markers, rendered per request.
Pure functions; used by `tables.TableMaker`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from runtimekit.cluster.apiserver.resources import PrinterColumn, ResourceInfo
from runtimekit.kube.objects import JsonObject

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically."
)


class ColumnDefinition(TypedDict):
    """`meta.k8s.io/v1` TableColumnDefinition, as a Table's `columnDefinitions` lists it."""

    name: str
    type: str
    format: str
    description: str
    priority: int


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> ColumnDefinition:
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


def get_path(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):  # objects come from JSON: dicts (cheaper to test than Mapping)
            return None
        obj = obj.get(part)
    return obj


def created(obj: Mapping[str, object]) -> Since:
    return Since(str(get_path(obj, "metadata", "creationTimestamp") or ""))


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (Mapping, list)) else 0


def _ports(spec: JsonObject) -> str:
    ports = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    return ",".join(ports) or "<none>"


def _job_status(job: JsonObject) -> str:
    for condition in get_path(job, "status", "conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed", "Suspended"):
            return str(condition["type"])
    return "Running"


def _event_object(event: JsonObject) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_time(event: JsonObject) -> Since:
    return Since(
        str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or get_path(event, "metadata", "creationTimestamp")
            or ""
        )
    )


def _controller(obj: JsonObject) -> str:
    """`<kind lowercased>.<group>/<name>` of the controlling owner, as kubectl prints it."""
    for ref in get_path(obj, "metadata", "ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", "")).lower()
            return f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
    return "<none>"


def _status_count(field: str) -> Callable[[JsonObject], object]:
    return lambda obj: int(get_path(obj, "status", field) or 0)


def _simple(*cells: Callable[[JsonObject], object]) -> Callable[[JsonObject], tuple[object, ...]]:
    def build(obj: JsonObject) -> tuple[object, ...]:
        return tuple(cell(obj) for cell in cells)

    return build


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _access_modes(modes: Any) -> str:
    """kubectl's `GetAccessModesAsString`: the short names in a fixed order, each once."""
    listed = set(modes or ())
    return ",".join(short for mode, short in _ACCESS_MODES if mode in listed)


def _storage_class(obj: JsonObject) -> str:
    annotated = get_path(obj, "metadata", "annotations", "volume.beta.kubernetes.io/storage-class")
    return str(annotated if annotated is not None else get_path(obj, "spec", "storageClassName") or "")


def _phase(obj: JsonObject) -> str:
    """A claim's or volume's phase; Terminating once it is being deleted."""
    if get_path(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return str(get_path(obj, "status", "phase") or "")


def _claim_cells(claim: JsonObject) -> tuple[object, ...]:
    bound = bool(get_path(claim, "spec", "volumeName"))
    capacity = get_path(claim, "status", "capacity", "storage") if bound else None
    return (
        _phase(claim),
        str(get_path(claim, "spec", "volumeName") or ""),
        "" if capacity is None else str(capacity),
        _access_modes(get_path(claim, "status", "accessModes")) if bound else "",
        _storage_class(claim),
        str(get_path(claim, "spec", "volumeAttributesClassName") or "<unset>"),
        created(claim),
        str(get_path(claim, "spec", "volumeMode") or "<unset>"),
    )


def _volume_cells(volume: JsonObject) -> tuple[object, ...]:
    ref = get_path(volume, "spec", "claimRef") or {}
    capacity = get_path(volume, "spec", "capacity", "storage")
    return (
        "" if capacity is None else str(capacity),
        _access_modes(get_path(volume, "spec", "accessModes")),
        str(get_path(volume, "spec", "persistentVolumeReclaimPolicy") or ""),
        _phase(volume),
        f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else "",
        _storage_class(volume),
        str(get_path(volume, "spec", "volumeAttributesClassName") or "<unset>"),
        str(get_path(volume, "status", "reason") or ""),
        created(volume),
        str(get_path(volume, "spec", "volumeMode") or "<unset>"),
    )


_CELLS: dict[tuple[str, str], Callable[[JsonObject], tuple[object, ...]]] = {
    ("", "Namespace"): _simple(lambda o: str(get_path(o, "status", "phase") or ""), created),
    ("", "ConfigMap"): _simple(lambda o: _count(o.get("data")) + _count(o.get("binaryData")), created),
    ("", "Secret"): _simple(lambda o: str(o.get("type") or ""), lambda o: _count(o.get("data")), created),
    ("", "ServiceAccount"): _simple(lambda o: _count(o.get("secrets")), created),
    ("", "Service"): _simple(
        lambda o: str(get_path(o, "spec", "type") or ""),
        lambda o: str(get_path(o, "spec", "clusterIP") or "<none>"),
        lambda o: ",".join(get_path(o, "spec", "externalIPs") or []) or "<none>",
        lambda o: _ports(o.get("spec") or {}),
        created,
    ),
    ("", "Event"): _simple(
        _event_time,
        lambda o: str(o.get("type") or ""),
        lambda o: str(o.get("reason") or ""),
        _event_object,
        lambda o: str(o.get("message") or ""),
    ),
    ("apps", "Deployment"): _simple(
        lambda o: f"{get_path(o, 'status', 'readyReplicas') or 0}/{get_path(o, 'spec', 'replicas') or 0}",
        lambda o: int(get_path(o, "status", "updatedReplicas") or 0),
        lambda o: int(get_path(o, "status", "availableReplicas") or 0),
        created,
    ),
    ("apps", "ReplicaSet"): _simple(
        lambda o: int(get_path(o, "spec", "replicas") or 0),
        _status_count("replicas"),
        _status_count("readyReplicas"),
        created,
    ),
    ("apps", "StatefulSet"): _simple(
        lambda o: f"{get_path(o, 'status', 'readyReplicas') or 0}/{get_path(o, 'spec', 'replicas') or 0}", created
    ),
    ("apps", "ControllerRevision"): _simple(_controller, lambda o: int(o.get("revision") or 0), created),
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
            ",".join(f"{k}={v}" for k, v in (get_path(o, "spec", "template", "spec", "nodeSelector") or {}).items())
            or "<none>"
        ),
        created,
    ),
    ("batch", "Job"): _simple(
        _job_status,
        lambda o: f"{get_path(o, 'status', 'succeeded') or 0}/{get_path(o, 'spec', 'completions') or 1}",
        created,
    ),
    ("coordination.k8s.io", "Lease"): _simple(
        lambda o: str(get_path(o, "spec", "holderIdentity") or "<none>"), created
    ),
    ("scheduling.k8s.io", "PriorityClass"): _simple(
        lambda o: int(o.get("value") or 0), lambda o: bool(o.get("globalDefault") or False), created
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _simple(
        lambda o: str(get_path(o, "metadata", "creationTimestamp") or "")
    ),
    ("", "PersistentVolumeClaim"): _claim_cells,
    ("", "PersistentVolume"): _volume_cells,
    ("storage.k8s.io", "StorageClass"): _simple(
        lambda o: str(o.get("provisioner") or ""),
        lambda o: str(o.get("reclaimPolicy") or "Delete"),
        lambda o: str(o.get("volumeBindingMode") or "Immediate"),
        lambda o: bool(o.get("allowVolumeExpansion") or False),
        created,
    ),
    ("storage.k8s.io", "CSINode"): _simple(lambda o: len(get_path(o, "spec", "drivers") or []), created),
}
_COLUMNS: dict[tuple[str, str], Sequence[Column]] = {
    ("", "Namespace"): (Column("Status"), AGE),
    ("", "ConfigMap"): (Column("Data", "integer"), AGE),
    ("", "Secret"): (Column("Type"), Column("Data", "integer"), AGE),
    ("", "ServiceAccount"): (Column("Secrets", "integer"), AGE),
    ("", "Service"): (Column("Type"), Column("Cluster-IP"), Column("External-IP"), Column("Port(s)"), AGE),
    ("", "Event"): (Column("Last Seen"), Column("Type"), Column("Reason"), Column("Object"), Column("Message")),
    ("apps", "Deployment"): (Column("Ready"), Column("Up-to-date", "integer"), Column("Available", "integer"), AGE),
    ("apps", "ReplicaSet"): (
        Column("Desired", "integer"),
        Column("Current", "integer"),
        Column("Ready", "integer"),
        AGE,
    ),
    ("apps", "StatefulSet"): (Column("Ready"), AGE),
    ("apps", "ControllerRevision"): (Column("Controller"), Column("Revision", "integer"), AGE),
    ("apps", "DaemonSet"): (
        *(Column(n, "integer") for n in ("Desired", "Current", "Ready", "Up-to-date", "Available")),
        Column("Node Selector"),
        AGE,
    ),
    ("batch", "Job"): (Column("Status"), Column("Completions"), AGE),
    ("coordination.k8s.io", "Lease"): (Column("Holder"), AGE),
    ("scheduling.k8s.io", "PriorityClass"): (Column("Value", "integer"), Column("Global-Default", "boolean"), AGE),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (Column("Created At", format="date"),),
    ("", "PersistentVolumeClaim"): (
        Column("Status"),
        Column("Volume"),
        Column("Capacity"),
        Column("Access Modes"),
        Column("StorageClass"),
        Column("VolumeAttributesClass"),
        AGE,
        Column("VolumeMode", priority=1),
    ),
    ("", "PersistentVolume"): (
        Column("Capacity"),
        Column("Access Modes"),
        Column("Reclaim Policy"),
        Column("Status"),
        Column("Claim"),
        Column("StorageClass"),
        Column("VolumeAttributesClass"),
        Column("Reason"),
        AGE,
        Column("VolumeMode", priority=1),
    ),
    ("storage.k8s.io", "StorageClass"): (
        Column("Provisioner"),
        Column("ReclaimPolicy"),
        Column("VolumeBindingMode"),
        Column("AllowVolumeExpansion", "boolean"),
        AGE,
    ),
    ("storage.k8s.io", "CSINode"): (Column("Drivers", "integer"), AGE),
}


# CRD printer columns

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


def printer_cell(column: PrinterColumn, obj: JsonObject) -> object:
    value = json_path(obj, column.json_path)
    if column.type == "date":
        return Since(str(value or ""))
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def printer_column(column: PrinterColumn) -> Column:
    return Column(column.name, column.type, column.priority, column.format, column.description)


def cells_for(info: ResourceInfo, obj: JsonObject) -> tuple[object, ...]:
    """The cells after NAME of a kind printed here (NAME, AGE for kinds without columns)."""
    builder = _CELLS.get((info.group, info.kind))
    if builder is not None:
        return builder(obj)
    if info.printer_columns:
        return tuple(printer_cell(c, obj) for c in info.printer_columns)
    return (created(obj),)


def columns_for(info: ResourceInfo) -> list[Column]:
    found = _COLUMNS.get((info.group, info.kind))
    if found is not None:
        return [NAME, *found]
    if info.printer_columns:
        return [NAME, *(printer_column(c) for c in info.printer_columns)]
    return [NAME, AGE]
