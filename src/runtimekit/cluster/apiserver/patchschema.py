"""Patch strategies of the built-in kinds: which lists merge by which key in a strategic merge patch.

This is the subset of the Go struct tags (`patchStrategy:"merge" patchMergeKey:"name"`,
`patchStrategy:"retainKeys"`) that kubectl apply exercises on the kinds this server stores. A list
not named here is replaced whole, as in Kubernetes (tolerations, taints, args, command...).
Server-side apply reads the same tree as the OpenAPI's `x-kubernetes-list-type` (a merge list is a
`map` keyed by `keys`, or a `set` without a key; any other list is `atomic`) and
`x-kubernetes-map-type: atomic` (`Struct.atomic`, the `+mapType=atomic` maps).
Pure data; read by `patch.strategic_merge` and `fieldpaths.Place`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias


@dataclass(frozen=True)
class Struct:
    """An object's fields that have a non-default strategy; `retain_keys` honours `$retainKeys`."""

    fields: Mapping[str, Node] = field(default_factory=dict)
    retain_keys: bool = False
    atomic: bool = False  # a `+mapType=atomic` map: server-side apply owns and replaces it whole


@dataclass(frozen=True)
class MergeList:
    """A list merged element-wise: by `key` for lists of objects, by value when `key` is None."""

    key: str | None
    item: Struct = field(default_factory=Struct)
    keys: tuple[str, ...] = ()  # the list-map keys where they are more than `key` (ports: containerPort, protocol)
    defaults: tuple[tuple[str, str], ...] = ()  # a key's default when an element omits it (protocol: TCP)

    @property
    def map_keys(self) -> tuple[str, ...]:
        """The `x-kubernetes-list-map-keys` (empty for a set)."""
        return self.keys or ((self.key,) if self.key is not None else ())


Node: TypeAlias = Struct | MergeList

EMPTY = Struct()

METADATA = Struct({"finalizers": MergeList(None), "ownerReferences": MergeList("uid")})
CONDITIONS = MergeList("type")
_TCP = (("protocol", "TCP"),)

CONTAINER = Struct(
    {
        "env": MergeList("name"),
        "ports": MergeList("containerPort", keys=("containerPort", "protocol"), defaults=_TCP),
        "volumeMounts": MergeList("mountPath"),
        "volumeDevices": MergeList("devicePath"),
        "resizePolicy": MergeList("resourceName"),
    }
)
POD_SPEC = Struct(
    {
        "containers": MergeList("name", CONTAINER),
        "initContainers": MergeList("name", CONTAINER),
        "ephemeralContainers": MergeList("name", CONTAINER),
        "volumes": MergeList("name", Struct(retain_keys=True)),
        "imagePullSecrets": MergeList("name"),
        "hostAliases": MergeList("ip"),
        "topologySpreadConstraints": MergeList("topologyKey", keys=("topologyKey", "whenUnsatisfiable")),
        "nodeSelector": Struct(atomic=True),
        "resourceClaims": MergeList("name"),
        "schedulingGates": MergeList("name"),
    }
)
POD_TEMPLATE = Struct({"metadata": METADATA, "spec": POD_SPEC})
POD_STATUS = Struct(
    {
        "conditions": CONDITIONS,
        "podIPs": MergeList("ip"),
        "hostIPs": MergeList("ip"),
    }
)


def _workload(strategy_field: str) -> Struct:
    return Struct(
        {
            "metadata": METADATA,
            "spec": Struct({"template": POD_TEMPLATE, strategy_field: Struct(retain_keys=True)}),
            "status": Struct({"conditions": CONDITIONS}),
        }
    )


SCHEMAS: Mapping[str, Struct] = {
    "Pod": Struct({"metadata": METADATA, "spec": POD_SPEC, "status": POD_STATUS}),
    "Node": Struct(
        {
            "metadata": METADATA,
            "spec": Struct({"podCIDRs": MergeList(None)}),
            "status": Struct({"conditions": CONDITIONS, "addresses": MergeList("type")}),
        }
    ),
    "Namespace": Struct({"metadata": METADATA, "status": Struct({"conditions": CONDITIONS})}),
    "Service": Struct(
        {
            "metadata": METADATA,
            "spec": Struct(
                {"ports": MergeList("port", keys=("port", "protocol"), defaults=_TCP), "selector": Struct(atomic=True)}
            ),
        }
    ),
    "Deployment": _workload("strategy"),
    "DaemonSet": _workload("updateStrategy"),
    "StatefulSet": _workload("updateStrategy"),
    "ReplicaSet": _workload("unused"),
    "Job": Struct(
        {"metadata": METADATA, "spec": Struct({"template": POD_TEMPLATE}), "status": Struct({"conditions": CONDITIONS})}
    ),
    "ServiceAccount": Struct({"metadata": METADATA, "secrets": MergeList("name")}),
    "MutatingWebhookConfiguration": Struct({"metadata": METADATA, "webhooks": MergeList("name")}),
    "ValidatingWebhookConfiguration": Struct({"metadata": METADATA, "webhooks": MergeList("name")}),
}
DEFAULT = Struct({"metadata": METADATA})


def schema_for(kind: str) -> Struct:
    """The strategy tree of a built-in kind (metadata rules only for kinds not listed)."""
    return SCHEMAS.get(kind, DEFAULT)
