"""The resource table: which kinds the server serves, at which paths, with which verbs.

One `ResourceInfo` per served group/version/resource; adding a built-in kind is one entry in `BUILTIN`.
`ResourceTable` is the live registry (built-ins plus resources registered from CustomResourceDefinitions
at run time); discovery (`discovery.py`), routing and storage all read it. Pure data, no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


class NameRule(StrEnum):
    """How a kind's `metadata.name` is validated (apimachinery's name validators)."""

    SUBDOMAIN = "subdomain"  # RFC 1123 subdomain: most kinds
    LABEL = "label"  # RFC 1123 label: namespaces
    LABEL_1035 = "label1035"  # RFC 1035 label: services
    PATH_SEGMENT = "path"  # anything a URL path segment can hold: RBAC kinds


@dataclass(frozen=True)
class PrinterColumn:
    """A CRD `additionalPrinterColumns` entry; `json_path` is a simple `.a.b[0].c` path."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource. `storage` names the bucket its objects live in: two versions (or
    `events` in core/v1 and events.k8s.io/v1) sharing a bucket are two views of the same objects."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    # selectable field label -> dotted path in the stored object (metadata.name/namespace always work)
    fields: tuple[tuple[str, str], ...] = ()
    name_rule: NameRule = NameRule.SUBDOMAIN
    returns_deleted_object: bool = False  # DELETE answers with the object, not a Success Status
    create_keeps_status: bool = False  # only nodes keep the status given on create
    strategic_merge: bool = True  # built-in kinds take strategic merge patches, custom resources do not
    custom: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    storage_key: str = ""  # defaults to group/plural
    view: str = ""  # a conversion from the stored form ("" = stored form, only apiVersion differs)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage(self) -> str:
        return self.storage_key or f"{self.group or 'core'}/{self.plural}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def tracks_generation(self) -> bool:
        """Whether metadata.generation counts spec changes (kinds with a status subresource, custom kinds)."""
        return self.has_status or self.custom

    def field_path(self, label: str) -> str | None:
        """The stored path behind a field-selector label, None when the kind does not support it."""
        if label in ("metadata.name", "metadata.namespace"):
            return label
        return dict(self.fields).get(label)


def _same(*labels: str) -> tuple[tuple[str, str], ...]:
    return tuple((label, label) for label in labels)


_STATUS = frozenset({"status"})
_ADMISSION = "admissionregistration.k8s.io"
_SCALABLE = frozenset({"status", "scale"})  # the workloads `kubectl scale` works on
_EVENT_FIELDS = (
    *_same(
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "type",
    ),
    ("source", "source.component"),
)
_EVENTS_V1_FIELDS = (
    *_EVENT_FIELDS,
    *((f"regarding.{part}", f"involvedObject.{part}") for part in ("kind", "namespace", "name", "uid", "apiVersion")),
    ("reportingController", "reportingComponent"),
)
_VOLCANO_PODGROUP_COLUMNS = (
    PrinterColumn("STATUS", "string", ".status.phase"),
    PrinterColumn("minMember", "integer", ".spec.minMember"),
    PrinterColumn("RUNNINGS", "integer", ".status.running"),
    PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
    PrinterColumn("QUEUE", "string", ".spec.queue", priority=1),
)
_VOLCANO_JOB_COLUMNS = (  # as Volcano's batch.volcano.sh_jobs CRD declares them
    PrinterColumn("STATUS", "string", ".status.state.phase"),
    PrinterColumn("minAvailable", "integer", ".status.minAvailable"),
    PrinterColumn("RUNNINGS", "integer", ".status.running"),
    PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
    PrinterColumn("QUEUE", "string", ".spec.queue", priority=1),
)
_VOLCANO_QUEUE_COLUMNS = (
    PrinterColumn("STATE", "string", ".status.state"),
    PrinterColumn("WEIGHT", "integer", ".spec.weight", priority=1),
    PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
)

_DRA = "resource.k8s.io"
_DRA_VIEWS = {"v1beta1": "resource.k8s.io/v1beta1"}  # the one served version whose shape differs from v1's
_DRA_KINDS: tuple[tuple[str, str, bool, frozenset[str], tuple[tuple[str, str], ...]], ...] = (
    ("deviceclasses", "DeviceClass", False, frozenset(), ()),
    ("resourceclaims", "ResourceClaim", True, _STATUS, ()),
    ("resourceclaimtemplates", "ResourceClaimTemplate", True, frozenset(), ()),
    # the kubelet plugin lists its node's slices by field (kube's resourceslice strategy selects these two)
    ("resourceslices", "ResourceSlice", False, frozenset(), _same("spec.nodeName", "spec.driver")),
)

BUILTIN: tuple[ResourceInfo, ...] = (
    ResourceInfo(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        ("ns",),
        subresources=frozenset({"status", "finalize"}),
        fields=_same("status.phase"),
        name_rule=NameRule.LABEL,
        returns_deleted_object=True,
    ),
    ResourceInfo(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        ("no",),
        subresources=_STATUS,
        fields=_same("spec.unschedulable"),
        create_keeps_status=True,
    ),
    ResourceInfo(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("po",),
        ("all",),
        subresources=frozenset({"status", "binding", "eviction", "log", "exec", "attach"}),
        fields=_same(
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ),
        returns_deleted_object=True,
    ),
    ResourceInfo("", "v1", "bindings", "Binding", True, verbs=("create",)),
    ResourceInfo("", "v1", "events", "Event", True, ("ev",), fields=_EVENT_FIELDS),
    ResourceInfo("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    ResourceInfo("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), subresources=_STATUS),
    ResourceInfo("", "v1", "secrets", "Secret", True, fields=_same("type")),
    ResourceInfo("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",), subresources=frozenset({"token"})),
    ResourceInfo(
        "",
        "v1",
        "services",
        "Service",
        True,
        ("svc",),
        ("all",),
        subresources=_STATUS,
        name_rule=NameRule.LABEL_1035,
        returns_deleted_object=True,
    ),
    ResourceInfo("", "v1", "endpoints", "Endpoints", True, ("ep",)),
    ResourceInfo(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        ("pvc",),
        subresources=_STATUS,
        returns_deleted_object=True,
    ),
    ResourceInfo(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        False,
        ("pv",),
        subresources=_STATUS,
        returns_deleted_object=True,
    ),
    ResourceInfo("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("all",), subresources=_SCALABLE),
    ResourceInfo("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("all",), subresources=_STATUS),
    ResourceInfo("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("all",), subresources=_SCALABLE),
    ResourceInfo(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        True,
        ("rs",),
        ("all",),
        subresources=_SCALABLE,
        fields=_same("status.replicas"),
    ),
    ResourceInfo("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    ResourceInfo(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        (),
        ("all",),
        subresources=_STATUS,
        fields=(("status.successful", "status.succeeded"),),
    ),
    ResourceInfo("batch", "v1", "cronjobs", "CronJob", True, ("cj",), ("all",), subresources=_STATUS),
    ResourceInfo("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceInfo("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ResourceInfo(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        ("ev",),
        fields=_EVENTS_V1_FIELDS,
        storage_key="core/events",
        view="events.k8s.io/v1",
    ),
    ResourceInfo(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        ("api-extensions",),
        subresources=_STATUS,
    ),
    ResourceInfo("rbac.authorization.k8s.io", "v1", "roles", "Role", True, name_rule=NameRule.PATH_SEGMENT),
    ResourceInfo(
        "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, name_rule=NameRule.PATH_SEGMENT
    ),
    ResourceInfo(
        "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, name_rule=NameRule.PATH_SEGMENT
    ),
    ResourceInfo(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        False,
        name_rule=NameRule.PATH_SEGMENT,
    ),
    ResourceInfo("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    ResourceInfo("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    ResourceInfo("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ResourceInfo(_ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    ResourceInfo(_ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    ResourceInfo("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    *(  # Dynamic Resource Allocation: v1 stores; v1beta2 has v1's shape, v1beta1 is converted (`draconversion`)
        ResourceInfo(
            _DRA, version, plural, kind, namespaced, subresources=subs, fields=fields, view=_DRA_VIEWS.get(version, "")
        )
        for version in ("v1", "v1beta2", "v1beta1")
        for plural, kind, namespaced, subs, fields in _DRA_KINDS
    ),
    ResourceInfo("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), subresources=_STATUS),
    ResourceInfo(
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        "PodGroup",
        True,
        ("pg", "podgroup-v1beta1"),
        subresources=_STATUS,  # as the kit's CRD (deploy/crds) declares it
        strategic_merge=False,
        custom=True,
        printer_columns=_VOLCANO_PODGROUP_COLUMNS,
    ),
    ResourceInfo(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "Queue",
        False,
        ("q", "queue-v1beta1"),
        subresources=_STATUS,
        strategic_merge=False,
        custom=True,
        printer_columns=_VOLCANO_QUEUE_COLUMNS,
    ),
    ResourceInfo(
        "batch.volcano.sh",
        "v1alpha1",
        "jobs",
        "Job",
        True,
        ("vcjob", "vj"),
        subresources=_STATUS,
        strategic_merge=False,
        custom=True,
        printer_columns=_VOLCANO_JOB_COLUMNS,
    ),
)


@dataclass(frozen=True)
class GroupVersions:
    """One API group as discovery lists it: its versions, preferred (first) version first."""

    name: str
    versions: tuple[str, ...]


@dataclass
class ResourceTable:
    """The live set of served resources. Safe to read from any thread; writes take a lock and
    replace the lookup dicts, so a reader never sees a half-registered CRD."""

    _by_path: dict[tuple[str, str, str], ResourceInfo] = field(default_factory=dict)
    _by_storage: dict[str, ResourceInfo] = field(default_factory=dict)  # storage -> the form it stores
    _lock: threading.Lock = field(default_factory=threading.Lock)
    generation: int = 0  # counts registrations: what is derived from the table (OpenAPI) is rebuilt on change

    def _replace(self, updated: dict[tuple[str, str, str], ResourceInfo]) -> None:
        by_storage: dict[str, ResourceInfo] = {}
        for info in updated.values():
            if not info.view:
                by_storage.setdefault(info.storage, info)
        self._by_path, self._by_storage = updated, by_storage
        self.generation += 1

    @classmethod
    def builtin(cls) -> ResourceTable:
        table = cls()
        table.add(BUILTIN)
        return table

    def add(self, infos: Iterable[ResourceInfo]) -> None:
        """Register resources; a resource already served at the same group/version/plural is kept."""
        with self._lock:
            updated = dict(self._by_path)
            for info in infos:
                updated.setdefault((info.group, info.version, info.plural), info)
            self._replace(updated)

    def remove(self, group: str, plural: str) -> list[ResourceInfo]:
        """Unregister every version of group/plural; returns what was removed."""
        with self._lock:
            gone = [info for key, info in self._by_path.items() if key[0] == group and key[2] == plural]
            self._replace({k: v for k, v in self._by_path.items() if not (k[0] == group and k[2] == plural)})
        return gone

    def lookup(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._by_path.get((group, version, plural))

    def all(self) -> list[ResourceInfo]:
        return list(self._by_path.values())

    def resources(self, group: str, version: str) -> list[ResourceInfo]:
        return [info for (g, v, _), info in self._by_path.items() if g == group and v == version]

    def by_storage(self, storage: str) -> list[ResourceInfo]:
        return [info for info in self._by_path.values() if info.storage == storage]

    def groups(self) -> list[GroupVersions]:
        """Named groups in registration order (the core group is served at /api, not here)."""
        seen: dict[str, list[str]] = {}
        for group, version, _ in self._by_path:
            if group and version not in seen.setdefault(group, []):
                seen[group].append(version)
        return [GroupVersions(name, tuple(_by_priority(versions))) for name, versions in seen.items()]

    def storage_resource(self, storage: str) -> ResourceInfo | None:
        """The resource whose form the bucket stores (the one without a view)."""
        return self._by_storage.get(storage)


def _by_priority(versions: list[str]) -> list[str]:
    """Kubernetes version priority: GA before beta before alpha, higher numbers first."""
    import re

    def key(version: str) -> tuple[int, int, int]:
        match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
        if not match:
            return (3, 0, 0)
        stage = {"": 0, "beta": 1, "alpha": 2}[match.group(2) or ""]
        return (stage, -int(match.group(1)), -int(match.group(3) or 0))

    return sorted(versions, key=key)


def kinds_by_name(infos: Iterable[ResourceInfo]) -> Mapping[str, ResourceInfo]:
    return {info.kind: info for info in infos}
