"""Discovery documents (`/version`, `/api`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`) built from the table.

kubectl and every client library read these before anything else; kubectl needs name, kind,
namespaced, verbs and shortNames per resource. The plain (non-aggregated) form is served to every
client: kubectl 1.27+ asks for aggregated discovery first and falls back to it. Pure functions,
called by the HTTP layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

from runtimekit.cluster.apiserver.resources import ResourceInfo, ResourceTable

_SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "finalize": ("update",),
    "binding": ("create",),
    "eviction": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "scale": ("get", "patch", "update"),
    "token": ("create",),
}
_SUBRESOURCE_KIND = {
    "binding": "Binding",
    "eviction": "Eviction",
    "scale": "Scale",
    "exec": "PodExecOptions",
    "attach": "PodAttachOptions",
    "token": "TokenRequest",
}
# subresources whose body is of another group
_SUBRESOURCE_GROUP = {
    "eviction": ("policy", "v1"),
    "scale": ("autoscaling", "v1"),
    "token": ("authentication.k8s.io", "v1"),
}


class VersionInfo(TypedDict):
    """`version.Info`, what `/version` answers."""

    major: str
    minor: str
    gitVersion: str
    gitCommit: str
    gitTreeState: str
    buildDate: str
    goVersion: str
    compiler: str
    platform: str


class ServerAddressByClientCIDR(TypedDict):
    clientCIDR: str
    serverAddress: str


class APIVersions(TypedDict):
    kind: str
    versions: list[str]
    serverAddressByClientCIDRs: list[ServerAddressByClientCIDR]


class GroupVersionForDiscovery(TypedDict):
    groupVersion: str
    version: str


class APIGroup(TypedDict, total=False):
    """One group; `kind` and `apiVersion` only when it is the whole answer (`/apis/<group>`)."""

    kind: str
    apiVersion: str
    name: str
    versions: list[GroupVersionForDiscovery]
    preferredVersion: GroupVersionForDiscovery


class APIGroupList(TypedDict):
    kind: str
    apiVersion: str
    groups: list[APIGroup]


class APIResource(TypedDict, total=False):
    name: str
    singularName: str
    namespaced: bool
    group: str  # a subresource whose body is of another group (eviction, scale)
    version: str
    kind: str
    verbs: list[str]
    shortNames: list[str]
    categories: list[str]


class APIResourceList(TypedDict):
    kind: str
    apiVersion: str
    groupVersion: str
    resources: list[APIResource]


DiscoveryDocument = APIVersions | APIGroupList | APIGroup | APIResourceList


@dataclass(frozen=True)
class KubernetesVersion:
    """The version `/version` reports; `parse("1.31")` is v1.31.0."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion:
        match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
        if not match:
            raise ValueError(f"kubernetes version must look like 1.31 or v1.31.2, got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))

    @property
    def git_version(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"


def version_info(version: KubernetesVersion) -> VersionInfo:
    return {
        "major": str(version.major),
        "minor": str(version.minor),
        "gitVersion": version.git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> APIVersions:
    """`GET /api`: the legacy core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: tuple[str, ...]) -> APIGroup:
    entries: list[GroupVersionForDiscovery] = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(table: ResourceTable) -> APIGroupList:
    """`GET /apis`."""
    groups = [_group(g.name, g.versions) for g in table.groups()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(table: ResourceTable, name: str) -> APIGroup | None:
    """`GET /apis/<group>`, None when the group is not served."""
    for group in table.groups():
        if group.name == name:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(group.name, group.versions)}
    return None


def _entries(info: ResourceInfo) -> list[APIResource]:
    main: APIResource = {
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        main["shortNames"] = list(info.short_names)
    if info.categories:
        main["categories"] = list(info.categories)
    return [main, *(_subresource(info, sub) for sub in sorted(info.subresources))]


def _subresource(info: ResourceInfo, sub: str) -> APIResource:
    entry: APIResource = {"name": f"{info.plural}/{sub}", "singularName": "", "namespaced": info.namespaced}
    if sub in _SUBRESOURCE_GROUP:
        entry["group"], entry["version"] = _SUBRESOURCE_GROUP[sub]
    entry["kind"] = _SUBRESOURCE_KIND.get(sub, info.kind)
    entry["verbs"] = list(_SUBRESOURCE_VERBS[sub])
    return entry


def api_resource_list(table: ResourceTable, group: str, version: str) -> APIResourceList | None:
    """`GET /api/v1` or `GET /apis/<group>/<version>`, None when that group/version is not served."""
    infos = table.resources(group, version)
    if not infos:
        return None
    resources = [entry for info in sorted(infos, key=lambda i: i.plural) for entry in _entries(info)]
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
