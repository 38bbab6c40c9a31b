"""The ClusterRoles and ClusterRoleBindings kube-apiserver creates at start-up (its bootstrap policy,
plugin/pkg/auth/authorizer/rbac/bootstrappolicy), the ones users and manifests refer to: `cluster-admin`
(bound to `system:masters`), the user-facing `admin`, `edit` and `view` (aggregated from the
`system:aggregate-to-*` roles, so a ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-view`
extends them, as on a real cluster), `system:discovery`, `system:basic-user` and
`system:public-info-viewer`, the kubelet's `system:node` and the controllers the embedded cluster runs.

Differences, said in docs/security.md: `system:node` is bound to the group `system:nodes` (kube ≥ 1.8
authorises kubelets with its Node authorizer instead), and `system:kube-controller-manager` may do
anything on resources, because the embedded controller manager runs every controller under its one
user (kube-controller-manager gives each its own ServiceAccount). `server.ApiServer` creates the
missing ones when it starts, marked `kubernetes.io/bootstrapping: rbac-defaults`.
"""

from __future__ import annotations

from runtimekit.kube.objects.meta import LabelSelector
from runtimekit.kube.objects.rbac import PolicyRule, Role, RoleBinding, Subject

BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_RBAC = "rbac.authorization.k8s.io"
_AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_EVENTS = ["create", "patch", "update"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> PolicyRule:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _group(name: str) -> Subject:
    return {"kind": "Group", "apiGroup": _RBAC, "name": name}


def _urls(urls: list[str], verbs: list[str]) -> PolicyRule:
    return {"nonResourceURLs": urls, "verbs": verbs}


_VIEW_CORE = [
    "configmaps",
    "endpoints",
    "persistentvolumeclaims",
    "persistentvolumeclaims/status",
    "pods",
    "pods/log",
    "pods/status",
    "replicationcontrollers",
    "replicationcontrollers/scale",
    "replicationcontrollers/status",
    "serviceaccounts",
    "services",
    "services/status",
    "bindings",
    "events",
    "limitranges",
    "resourcequotas",
    "resourcequotas/status",
    "namespaces",
    "namespaces/status",
]
_APPS = [
    "daemonsets",
    "deployments",
    "deployments/scale",
    "replicasets",
    "replicasets/scale",
    "statefulsets",
    "statefulsets/scale",
]
_VIEW_APPS = [
    *_APPS,
    "controllerrevisions",
    "daemonsets/status",
    "deployments/status",
    "replicasets/status",
    "statefulsets/status",
]

_ROLES: dict[str, list[PolicyRule]] = {
    "cluster-admin": [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])],
    "system:discovery": [
        _urls(
            [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
            ["get"],
        ),
    ],
    "system:public-info-viewer": [_urls(["/healthz", "/livez", "/readyz", "/version", "/version/"], ["get"])],
    "system:basic-user": [
        _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
        _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
    ],
    "system:aggregate-to-view": [
        _rule([""], _VIEW_CORE, _READ),
        _rule(["apps"], _VIEW_APPS, _READ),
        _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], _READ),
        _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], _READ),
        _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
        _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], _READ),
        _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    ],
    "system:aggregate-to-edit": [
        _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], _READ),
        _rule([""], ["serviceaccounts"], ["impersonate"]),
        _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], _WRITE),
        _rule([""], ["pods/eviction", "serviceaccounts/token"], ["create"]),
        _rule(
            [""],
            [
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
            _WRITE,
        ),
        _rule(["apps"], [*_APPS, "deployments/rollback"], _WRITE),
        _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
        _rule(["batch"], ["cronjobs", "jobs"], _WRITE),
        _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
        _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], _WRITE),
        _rule(["coordination.k8s.io"], ["leases"], [*_READ, *_WRITE]),
        _rule(["discovery.k8s.io"], ["endpointslices"], _WRITE),
    ],
    "system:aggregate-to-admin": [
        _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
        _rule(["rbac.authorization.k8s.io"], ["rolebindings", "roles"], [*_READ, *_WRITE]),
    ],
    "system:node": [
        _rule([""], ["nodes"], [*_READ, "create", "update", "patch", "delete"]),
        _rule([""], ["nodes/status"], ["patch", "update"]),
        # patch: the simulated kubelet records the environment a container got in a pod annotation
        _rule([""], ["pods"], [*_READ, "create", "delete", "patch"]),
        _rule([""], ["pods/status"], ["patch", "update"]),
        _rule([""], ["pods/eviction"], ["create"]),
        _rule([""], ["services", "endpoints"], _READ),
        _rule([""], ["configmaps", "secrets", "persistentvolumeclaims", "persistentvolumes"], _READ),
        _rule([""], ["persistentvolumeclaims/status"], ["get", "patch", "update"]),
        _rule([""], ["serviceaccounts/token"], ["create"]),
        _rule(["", "events.k8s.io"], ["events"], _EVENTS),
        _rule(["coordination.k8s.io"], ["leases"], [*_READ, "create", "update", "patch", "delete"]),
        _rule(["storage.k8s.io"], ["csinodes"], [*_READ, "create", "update", "patch", "delete"]),
        _rule(["storage.k8s.io"], ["storageclasses"], _READ),
        _rule(["node.k8s.io"], ["runtimeclasses"], _READ),
        _rule(["resource.k8s.io"], ["resourceclaims"], ["get"]),  # kube's, with DynamicResourceAllocation (GA)
        _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
        _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
    ],
    "system:kube-controller-manager": [_rule(["*"], ["*"], ["*"])],
    "system:controller:job-controller": [
        _rule(["batch"], ["jobs"], [*_READ, "update", "patch"]),
        _rule(["batch"], ["jobs/status", "jobs/finalizers"], ["update", "patch"]),
        _rule([""], ["pods"], ["list", "watch", "create", "delete", "patch"]),
        _rule(["", "events.k8s.io"], ["events"], _EVENTS),
    ],
}

_BINDINGS: dict[str, tuple[str, list[Subject]]] = {
    "cluster-admin": ("cluster-admin", [_group("system:masters")]),
    "system:discovery": ("system:discovery", [_group("system:authenticated")]),
    "system:basic-user": ("system:basic-user", [_group("system:authenticated")]),
    "system:public-info-viewer": (
        "system:public-info-viewer",
        [
            _group("system:authenticated"),
            _group("system:unauthenticated"),
        ],
    ),
    "system:node": ("system:node", [_group("system:nodes")]),
    "system:kube-controller-manager": (
        "system:kube-controller-manager",
        [{"kind": "User", "apiGroup": _RBAC, "name": "system:kube-controller-manager"}],
    ),
    "system:controller:job-controller": (
        "system:controller:job-controller",
        [{"kind": "ServiceAccount", "name": "job-controller", "namespace": "kube-system"}],
    ),
}


def cluster_roles() -> list[Role]:
    """The bootstrap ClusterRoles, new objects on each call."""
    out: list[Role] = []
    for name, rules in _ROLES.items():
        labels = dict(BOOTSTRAP_LABEL)
        if name.startswith("system:aggregate-to-"):
            labels.update(_aggregate_labels(name.removeprefix("system:aggregate-to-")))
        out.append({"metadata": {"name": name, "labels": labels}, "rules": [rule.copy() for rule in rules]})
    for name in ("admin", "edit", "view"):
        labels = {**BOOTSTRAP_LABEL, **_aggregate_labels(name)}
        del labels[_AGGREGATE + name]
        selector: LabelSelector = {"matchLabels": {_AGGREGATE + name: "true"}}
        out.append(
            {"metadata": {"name": name, "labels": labels}, "aggregationRule": {"clusterRoleSelectors": [selector]}}
        )
    return out


def _aggregate_labels(name: str) -> dict[str, str]:
    """The labels that put a role's rules into `name` and the roles wider than it (view is in edit, edit in
    admin)."""
    wider = {"view": ("view", "edit", "admin"), "edit": ("edit", "admin"), "admin": ("admin",)}[name]
    return {_AGGREGATE + role: "true" for role in wider}


def cluster_role_bindings() -> list[RoleBinding]:
    return [
        {
            "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABEL)},
            "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [subject.copy() for subject in subjects],
        }
        for name, (role, subjects) in _BINDINGS.items()
    ]
