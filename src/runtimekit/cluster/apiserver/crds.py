"""CustomResourceDefinitions: validate one, derive the resources it serves, and its status.

Creating a CRD registers its served versions in the `ResourceTable` at once (the real server's
`Established` condition is set immediately); deleting it removes them and their objects. Its objects
are checked against each version's structural schema (`crschema`); there is no pruning, defaulting
or conversion webhook: every version serves the same stored objects with its own `apiVersion`. Pure
functions; called by `operations.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from runtimekit.cluster.apiserver.errors import Cause, field_invalid, field_required, field_unsupported
from runtimekit.cluster.apiserver.resources import NameRule, PrinterColumn, ResourceInfo
from runtimekit.cluster.apiserver.validation import name_problems
from runtimekit.kube.objects import Condition, JsonObject, ObjectMeta


class CustomResourceColumnDefinition(TypedDict, total=False):
    name: str
    type: str
    jsonPath: str
    description: str
    priority: int
    format: str


class CustomResourceDefinitionVersion(TypedDict, total=False):
    name: str
    served: bool
    storage: bool
    subresources: JsonObject  # status, scale
    schema: JsonObject  # openAPIV3Schema (`crschema` checks objects by it)
    additionalPrinterColumns: list[CustomResourceColumnDefinition]


class CustomResourceDefinitionNames(TypedDict, total=False):
    plural: str
    singular: str
    kind: str
    listKind: str
    shortNames: list[str]
    categories: list[str]


class CustomResourceDefinitionSpec(TypedDict, total=False):
    group: str
    names: CustomResourceDefinitionNames
    scope: str  # Namespaced, Cluster
    versions: list[CustomResourceDefinitionVersion]


class CustomResourceDefinitionStatus(TypedDict, total=False):
    conditions: list[Condition]
    acceptedNames: CustomResourceDefinitionNames
    storedVersions: list[str]


class CustomResourceDefinition(TypedDict, total=False):
    """`apiextensions.k8s.io/v1` CustomResourceDefinition, the fields the server reads."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: CustomResourceDefinitionSpec
    status: CustomResourceDefinitionStatus


def check_crd(crd: CustomResourceDefinition) -> list[Cause]:
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return [field_required("spec")]
    given = spec.get("names")
    names: CustomResourceDefinitionNames = given if isinstance(given, Mapping) else {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    causes: list[Cause] = []
    if not group:
        causes.append(field_required("spec.group"))
    elif "." not in str(group) or name_problems(str(group), NameRule.SUBDOMAIN):
        causes.append(field_invalid("spec.group", group, "should be a domain with at least one dot"))
    if not plural:
        causes.append(field_required("spec.names.plural"))
    if not kind:
        causes.append(field_required("spec.names.kind"))
    name = (crd.get("metadata") or {}).get("name")
    if group and plural and name != f"{plural}.{group}":
        causes.append(field_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(field_unsupported("spec.scope", spec.get("scope"), ["Cluster", "Namespaced"]))
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(field_required("spec.versions", "must have exactly one version marked as storage version"))
    elif sum(1 for v in versions if isinstance(v, Mapping) and v.get("storage")) != 1:
        causes.append(field_invalid("spec.versions", "", "must have exactly one version marked as storage version"))
    return causes


def _columns(version: CustomResourceDefinitionVersion) -> tuple[PrinterColumn, ...]:
    columns = version.get("additionalPrinterColumns") or []
    return tuple(
        PrinterColumn(
            str(c.get("name", "")),
            str(c.get("type", "string")),
            str(c.get("jsonPath", "")),
            str(c.get("description", "")),
            int(c.get("priority", 0) or 0),
            str(c.get("format", "")),
        )
        for c in columns
        if isinstance(c, Mapping)
    )


def crd_resources(crd: CustomResourceDefinition) -> list[ResourceInfo]:
    """The resources a valid CRD serves, storage version first."""
    spec = crd["spec"]
    names = spec["names"]
    versions = sorted(spec["versions"], key=lambda v: not v.get("storage"))
    return [
        ResourceInfo(
            group=spec["group"],
            version=str(v["name"]),
            plural=names["plural"],
            kind=names["kind"],
            namespaced=spec["scope"] == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=frozenset({"status"}) if "status" in (v.get("subresources") or {}) else frozenset(),
            strategic_merge=False,
            custom=True,
            printer_columns=_columns(v),
            storage_key=f"{spec['group']}/{names['plural']}",
        )
        for v in versions
        if v.get("served", True)
    ]


def crd_status(crd: CustomResourceDefinition, now: str) -> CustomResourceDefinitionStatus:
    """The status the apiextensions controllers would set: names accepted, established."""
    spec = crd["spec"]
    names = spec["names"].copy()
    names.setdefault("singular", str(names["kind"]).lower())
    names.setdefault("listKind", f"{names['kind']}List")
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    conditions: list[Condition] = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]
    return {"conditions": conditions, "acceptedNames": names, "storedVersions": [storage]}
