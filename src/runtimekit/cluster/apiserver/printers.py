"""Generic server-side printing: table columns and cells of the kinds without GPU columns, and
CustomResourceDefinition `additionalPrinterColumns` (a simple JSONPath).

`cells_for`/`columns_for` give kubectl the columns kube's printers give (pkg/printers/internalversion/
printers.go, wide ones with priority 1) for namespaces, configmaps, secrets, services, endpoints,
events (no NAME first: `UNNAMED`), deployments, replica sets, stateful sets, daemon sets, controller
revisions, jobs, cronjobs, leases, priority classes, claims, volumes, storage classes, endpoint
slices, RBAC, PDBs, webhook configurations, runtime classes, resource claims and slices, CRDs and
custom resources; every other kind gets NAME and AGE. The cells that need more than a field are
`printcells`. Cells that depend on the time are `Since` markers, rendered per request. Pure
functions; used by `tables.TableMaker`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runtimekit.cluster.apiserver import printcells as pc
from runtimekit.cluster.apiserver.printers_base import AGE, NAME, Column, Since, created, get_path
from runtimekit.cluster.apiserver.resources import PrinterColumn, ResourceInfo
from runtimekit.kube.objects import JsonObject


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (Mapping, list)) else 0


def _ports(spec: JsonObject) -> str:
    ports = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    return ",".join(ports) or "<none>"


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


# CONTAINERS, IMAGES, SELECTOR: the wide columns of the workloads with a pod template
_WIDE: tuple[Callable[[JsonObject], object], ...] = (
    lambda o: pc.template_wide(o)[0],
    lambda o: pc.template_wide(o)[1],
    lambda o: pc.format_selector(get_path(o, "spec", "selector")),
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
        lambda o: pc.format_labels(get_path(o, "spec", "selector")),
    ),
    ("", "Endpoints"): _simple(pc.format_endpoints, created),
    ("", "Event"): pc.event_cells,
    ("events.k8s.io", "Event"): pc.event_cells,
    ("apps", "Deployment"): _simple(
        lambda o: f"{get_path(o, 'status', 'readyReplicas') or 0}/{get_path(o, 'spec', 'replicas') or 0}",
        lambda o: int(get_path(o, "status", "updatedReplicas") or 0),
        lambda o: int(get_path(o, "status", "availableReplicas") or 0),
        created,
        *_WIDE,
    ),
    ("apps", "ReplicaSet"): _simple(
        lambda o: int(get_path(o, "spec", "replicas") or 0),
        _status_count("replicas"),
        _status_count("readyReplicas"),
        created,
        *_WIDE,
    ),
    ("apps", "StatefulSet"): _simple(
        lambda o: f"{get_path(o, 'status', 'readyReplicas') or 0}/{get_path(o, 'spec', 'replicas') or 0}",
        created,
        *_WIDE[:2],
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
        *_WIDE,
    ),
    ("batch", "Job"): pc.job_cells,
    ("batch", "CronJob"): pc.cronjob_cells,
    ("coordination.k8s.io", "Lease"): _simple(
        lambda o: str(get_path(o, "spec", "holderIdentity") or "<none>"), created
    ),
    ("scheduling.k8s.io", "PriorityClass"): _simple(
        lambda o: int(o.get("value") or 0),
        lambda o: bool(o.get("globalDefault") or False),
        created,
        lambda o: str(o.get("preemptionPolicy") or ""),
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
    ("discovery.k8s.io", "EndpointSlice"): pc.endpoint_slice_cells,
    ("", "ResourceQuota"): pc.quota_cells,
    ("rbac.authorization.k8s.io", "Role"): _simple(pc.created_at),
    ("rbac.authorization.k8s.io", "ClusterRole"): _simple(pc.created_at),
    ("rbac.authorization.k8s.io", "RoleBinding"): pc.binding_cells,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): pc.binding_cells,
    ("policy", "PodDisruptionBudget"): pc.pdb_cells,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _simple(
        lambda o: len(o.get("webhooks") or []), created
    ),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _simple(
        lambda o: len(o.get("webhooks") or []), created
    ),
    ("node.k8s.io", "RuntimeClass"): _simple(lambda o: str(o.get("handler") or ""), created),
    ("storage.k8s.io", "CSINode"): _simple(lambda o: len(get_path(o, "spec", "drivers") or []), created),
    ("resource.k8s.io", "ResourceClaim"): _simple(pc.resource_claim_state, created),
    ("resource.k8s.io", "ResourceSlice"): _simple(
        lambda o: str(get_path(o, "spec", "nodeName") or ""),
        lambda o: str(get_path(o, "spec", "driver") or ""),
        lambda o: str(get_path(o, "spec", "pool", "name") or ""),
        created,
    ),
}
WIDE_COLUMNS = (
    Column("Containers", priority=1, description="Names of each container in the template."),
    Column("Images", priority=1, description="Images referenced by each container in the template."),
    Column("Selector", priority=1),
)
CREATED_AT = Column("Created At", "date")
BINDING_COLUMNS = (
    Column("Role"),
    AGE,
    Column("Users", priority=1),
    Column("Groups", priority=1),
    Column("ServiceAccounts", priority=1),
)
_COLUMNS: dict[tuple[str, str], Sequence[Column]] = {
    ("", "Namespace"): (Column("Status"), AGE),
    ("", "ConfigMap"): (Column("Data", "integer"), AGE),
    ("", "Secret"): (Column("Type"), Column("Data", "integer"), AGE),
    ("", "ServiceAccount"): (Column("Secrets", "integer"), AGE),
    ("", "Service"): (
        Column("Type"),
        Column("Cluster-IP"),
        Column("External-IP"),
        Column("Port(s)"),
        AGE,
        Column("Selector", priority=1),
    ),
    ("", "Endpoints"): (Column("Endpoints"), AGE),
    ("apps", "Deployment"): (
        Column("Ready"),
        Column("Up-to-date", "integer"),
        Column("Available", "integer"),
        AGE,
        *WIDE_COLUMNS,
    ),
    ("apps", "ReplicaSet"): (
        Column("Desired", "integer"),
        Column("Current", "integer"),
        Column("Ready", "integer"),
        AGE,
        *WIDE_COLUMNS,
    ),
    ("apps", "StatefulSet"): (Column("Ready"), AGE, *WIDE_COLUMNS[:2]),
    ("apps", "ControllerRevision"): (Column("Controller"), Column("Revision", "integer"), AGE),
    ("apps", "DaemonSet"): (
        *(Column(n, "integer") for n in ("Desired", "Current", "Ready", "Up-to-date", "Available")),
        Column("Node Selector"),
        AGE,
        *WIDE_COLUMNS,
    ),
    ("batch", "Job"): (Column("Status"), Column("Completions"), Column("Duration"), AGE, *WIDE_COLUMNS),
    ("batch", "CronJob"): (
        Column("Schedule"),
        Column("Timezone"),
        Column("Suspend", "boolean"),
        Column("Active", "integer"),
        Column("Last Schedule"),
        AGE,
        *WIDE_COLUMNS,
    ),
    ("coordination.k8s.io", "Lease"): (Column("Holder"), AGE),
    ("scheduling.k8s.io", "PriorityClass"): (
        Column("Value", "integer"),
        Column("Global-Default", "boolean"),
        AGE,
        Column("PreemptionPolicy"),
    ),
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
    ("discovery.k8s.io", "EndpointSlice"): (Column("AddressType"), Column("Ports"), Column("Endpoints"), AGE),
    ("", "ResourceQuota"): (AGE, Column("Request"), Column("Limit")),
    ("rbac.authorization.k8s.io", "Role"): (CREATED_AT,),
    ("rbac.authorization.k8s.io", "ClusterRole"): (CREATED_AT,),
    ("rbac.authorization.k8s.io", "RoleBinding"): BINDING_COLUMNS,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): BINDING_COLUMNS,
    ("policy", "PodDisruptionBudget"): (
        Column("Min Available"),
        Column("Max Unavailable"),
        Column("Allowed Disruptions", "integer"),
        AGE,
    ),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (Column("Webhooks", "integer"), AGE),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (Column("Webhooks", "integer"), AGE),
    ("node.k8s.io", "RuntimeClass"): (Column("Handler"), AGE),
    ("resource.k8s.io", "ResourceClaim"): (
        Column("State", description="A summary of the current state (allocated, pending, reserved, etc.)."),
        AGE,
    ),
    ("resource.k8s.io", "ResourceSlice"): (Column("Node"), Column("Driver"), Column("Pool"), AGE),
}
# kube's event columns: no NAME first (it is the last, wide column); `tables` puts no name before the cells
_EVENT_COLUMNS = (
    Column("Last Seen"),
    Column("Type"),
    Column("Reason"),
    Column("Object"),
    Column("Subobject", priority=1),
    Column("Source", priority=1),
    Column("Message"),
    Column("First Seen", priority=1),
    Column("Count", priority=1),
    Column("Name", priority=1, format="name", description=NAME.description),
)
UNNAMED = frozenset({("", "Event"), ("events.k8s.io", "Event")})  # kinds whose cells hold the name themselves


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
    if (info.group, info.kind) in UNNAMED:
        return list(_EVENT_COLUMNS)
    found = _COLUMNS.get((info.group, info.kind))
    if found is not None:
        return [NAME, *found]
    if info.printer_columns:
        return [NAME, *(printer_column(c) for c in info.printer_columns)]
    return [NAME, AGE]
