"""Whether a webhook rule covers a request (kube-apiserver's `predicates/rules`).

A rule matches when its scope, an operation, an API group, an API version and a resource all do.
`*` matches any group, version or operation. A resource entry `pods` matches the main resource only;
`pods/*` the main resource and all its subresources; `*/status` the status subresource of any
resource; `*` every main resource and no subresource; `*/*` everything. Scope `Namespaced` matches
requests in a namespace (never a Namespace object), `Cluster` cluster-scoped requests and Namespace
objects, `*` (the default) both. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtimekit.cluster.apiserver.admission.attributes import Resource
from runtimekit.kube.objects import RuleWithOperations

ALL = "*"
_NAMESPACES = Resource("", "v1", "namespaces")


def _exact_or_wildcard(items: Sequence[str], wanted: str) -> bool:
    return any(item in (ALL, wanted) for item in items)


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = ALL

    @classmethod
    def of(cls, raw: RuleWithOperations) -> Rule:
        return cls(
            tuple(raw.get("operations") or ()),
            tuple(raw.get("apiGroups") or ()),
            tuple(raw.get("apiVersions") or ()),
            tuple(raw.get("resources") or ()),
            raw.get("scope") or ALL,
        )

    def matches(self, operation: str, resource: Resource, subresource: str, namespace: str) -> bool:
        return (
            self._scope(resource, namespace)
            and _exact_or_wildcard(self.operations, operation)
            and _exact_or_wildcard(self.groups, resource.group)
            and _exact_or_wildcard(self.versions, resource.version)
            and self._resource(resource.resource, subresource)
        )

    def _scope(self, resource: Resource, namespace: str) -> bool:
        if self.scope == ALL:
            return True
        if self.scope == "Namespaced":
            return resource != _NAMESPACES and namespace != ""
        if self.scope == "Cluster":
            return resource == _NAMESPACES or namespace == ""
        return False

    def _resource(self, resource: str, subresource: str) -> bool:
        for entry in self.resources:
            main, _, sub = entry.partition("/")
            if main in (ALL, resource) and sub in (ALL, subresource):
                return True
        return False
