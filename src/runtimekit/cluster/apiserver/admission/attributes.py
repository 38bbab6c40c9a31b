"""One request as admission sees it (kube-apiserver's `admission.Attributes`).

`Resource` is a group, version and resource name (`pods`), `Kind` a group, version and kind; a
request has both as the client made it, plus the subresource (`binding`, `status`, or ""), the
operation, the object's name and namespace (a Namespace object's namespace is its own name, as
kube-apiserver sets it), the object and the old object as they stand (None where the operation has
none: no old object on CREATE, no object on DELETE), who asks, whether it is a dry run, and the
operation's options (`CreateOptions`, `UpdateOptions`, `DeleteOptions`). Pure values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtimekit.cluster.apiserver.identity import UserInfo
from runtimekit.kube.objects import JsonObject

CREATE, UPDATE, DELETE, CONNECT = "CREATE", "UPDATE", "DELETE", "CONNECT"
OPERATIONS = (CREATE, UPDATE, DELETE, CONNECT)
OPTIONS_KIND = {CREATE: "CreateOptions", UPDATE: "UpdateOptions", DELETE: "DeleteOptions"}


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    resource: str


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str


@dataclass(frozen=True)
class Attributes:
    operation: str
    resource: Resource
    kind: Kind
    subresource: str
    name: str
    namespace: str
    obj: JsonObject | None
    old: JsonObject | None
    user: UserInfo
    dry_run: bool = False
    options: JsonObject | None = None

    def with_object(self, obj: JsonObject | None) -> Attributes:
        return replace(self, obj=obj)

    @property
    def is_namespace(self) -> bool:
        """A request on a Namespace object itself (cluster-scoped, but its namespace is its name)."""
        return self.resource.group == "" and self.resource.resource == "namespaces"


def operation_options(operation: str, given: JsonObject | None = None) -> JsonObject | None:
    """The options object an operation carries (kube-apiserver's CreateOptions and friends)."""
    kind = OPTIONS_KIND.get(operation)
    if kind is None:
        return None
    return {"kind": kind, "apiVersion": "meta.k8s.io/v1", **(given or {})}
