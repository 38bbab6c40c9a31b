"""RBAC objects (rbac.authorization.k8s.io/v1): Role, ClusterRole, RoleBinding, ClusterRoleBinding, and
the review objects of authorization.k8s.io/v1 and authentication.k8s.io/v1 that ask the API server who
may do what. Pure TypedDicts; see `meta.py`.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.meta import LabelSelector, ObjectMeta


class PolicyRule(TypedDict, total=False):
    verbs: list[str]
    apiGroups: list[str]
    resources: list[str]
    resourceNames: list[str]
    nonResourceURLs: list[str]


class AggregationRule(TypedDict, total=False):
    clusterRoleSelectors: list[LabelSelector]


class Role(TypedDict, total=False):
    """A Role or a ClusterRole (which alone may carry an aggregationRule)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    rules: list[PolicyRule]
    aggregationRule: AggregationRule


class Subject(TypedDict, total=False):
    kind: str  # User, Group or ServiceAccount
    apiGroup: str
    name: str
    namespace: str


class RoleRef(TypedDict, total=False):
    apiGroup: str
    kind: str  # Role or ClusterRole
    name: str


class RoleBinding(TypedDict, total=False):
    """A RoleBinding or a ClusterRoleBinding."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    subjects: list[Subject]
    roleRef: RoleRef


class ResourceAttributes(TypedDict, total=False):
    namespace: str
    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    name: str


class NonResourceAttributes(TypedDict, total=False):
    path: str
    verb: str


class SubjectAccessReviewSpec(TypedDict, total=False):
    resourceAttributes: ResourceAttributes
    nonResourceAttributes: NonResourceAttributes
    user: str
    groups: list[str]
    uid: str
    extra: dict[str, list[str]]


class SubjectAccessReviewStatus(TypedDict, total=False):
    allowed: bool
    denied: bool
    reason: str
    evaluationError: str


class ResourceRule(TypedDict, total=False):
    verbs: list[str]
    apiGroups: list[str]
    resources: list[str]
    resourceNames: list[str]


class NonResourceRule(TypedDict, total=False):
    verbs: list[str]
    nonResourceURLs: list[str]


class SubjectRulesReviewStatus(TypedDict, total=False):
    resourceRules: list[ResourceRule]
    nonResourceRules: list[NonResourceRule]
    incomplete: bool
    evaluationError: str
