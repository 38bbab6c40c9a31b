"""`Authorizer`: kube-apiserver's `--authorization-mode=RBAC` over the server's own store.

A user in `system:masters` may do anything (kube's privileged-group short cut). Anyone else may do what
the Roles and ClusterRoles bound to their name, their groups or (as `system:serviceaccount:<ns>:<name>`)
their ServiceAccount allow: a ClusterRoleBinding grants everywhere, a RoleBinding in its namespace only.
An aggregated ClusterRole (`aggregationRule`) holds the rules of the ClusterRoles its selectors match,
computed here rather than written back by a controller.

The check runs on every request, so it is cheap: the bindings are indexed by subject once per change
of any RBAC object (the store's buckets count their writes), each user's `Grants` are computed on their
first request after that, and each distinct question's answer is memoised in them. Called by
`access.Access` (every HTTP request) and `reviews` (SubjectAccessReview and friends), on the server's
event loop thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from runtimekit.cluster.apiserver.authz.rules import Attributes, Grants, Rule, compile_rules
from runtimekit.cluster.apiserver.identity import UserInfo
from runtimekit.cluster.apiserver.resources import ResourceTable
from runtimekit.cluster.apiserver.store import Bucket, Store
from runtimekit.kube.objects.rbac import Role, RoleBinding, RoleRef
from runtimekit.kube.semantics.labels import label_selector

MASTERS = "system:masters"
_RBAC = "rbac.authorization.k8s.io"
_SA_PREFIX = "system:serviceaccount:"


@dataclass
class _Index:
    """The RBAC objects of one moment, indexed: (subject kind, name) -> [(binding namespace, roleRef)]."""

    cluster_roles: dict[str, Role] = field(default_factory=dict)
    roles: dict[tuple[str, str], Role] = field(default_factory=dict)
    subjects: dict[tuple[str, str], list[tuple[str, RoleRef]]] = field(default_factory=dict)
    resolved: dict[str, tuple[Rule, ...]] = field(default_factory=dict)  # ClusterRole name -> rules

    def bind(self, namespace: str, binding: RoleBinding) -> None:
        ref = binding.get("roleRef") or {}
        for subject in binding.get("subjects") or []:
            kind, name = subject.get("kind", ""), subject.get("name", "")
            if kind == "ServiceAccount":
                kind, name = "User", f"{_SA_PREFIX}{subject.get('namespace') or namespace}:{name}"
            self.subjects.setdefault((kind, name), []).append((namespace, ref))

    def cluster_role_rules(self, name: str, seen: frozenset[str] = frozenset()) -> tuple[Rule, ...]:
        found = self.resolved.get(name)
        if found is not None:
            return found
        role = self.cluster_roles.get(name)
        if role is None or name in seen:
            return ()
        rules = list(compile_rules(role.get("rules") or []))
        for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
            matches = label_selector(selector)
            for other, candidate in self.cluster_roles.items():
                if other != name and matches.matches(candidate.get("metadata", {}).get("labels") or {}):
                    rules.extend(self.cluster_role_rules(other, seen | {name}))
        resolved = self.resolved[name] = tuple(dict.fromkeys(rules))
        return resolved

    def role_rules(self, namespace: str, ref: RoleRef) -> tuple[Rule, ...]:
        if ref.get("kind") == "ClusterRole":
            return self.cluster_role_rules(ref.get("name", ""))
        role = self.roles.get((namespace, ref.get("name", "")))
        return compile_rules(role.get("rules") or []) if role is not None else ()


class Authorizer:
    """RBAC decisions for users; not thread-safe (the server's event loop calls it)."""

    def __init__(self, store: Store, table: ResourceTable) -> None:
        self._store = store
        self._buckets: list[Bucket] = []
        for plural in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
            info = table.lookup(_RBAC, "v1", plural)
            assert info is not None, plural
            self._buckets.append(store.bucket(info))
        self._infos = [bucket.info for bucket in self._buckets]
        self._seen = -1
        self._index = _Index()
        self._grants: dict[UserInfo, Grants] = {}

    def allowed(self, who: UserInfo, asked: Attributes) -> bool:
        if MASTERS in who.groups:
            return True
        return self.grants(who).allows(asked)

    def grants(self, who: UserInfo) -> Grants:
        """What `who` holds now (computed on first use after any RBAC object changed)."""
        roles, bindings, cluster_roles, cluster_bindings = self._buckets
        seen = roles.writes + bindings.writes + cluster_roles.writes + cluster_bindings.writes  # only ever grows
        if seen != self._seen:
            self._index, self._grants, self._seen = self._build(), {}, seen
        found = self._grants.get(who)
        if found is None:
            found = self._grants[who] = self._grants_of(who)
        return found

    def _build(self) -> _Index:
        index = _Index()
        roles, bindings, cluster_roles, cluster_bindings = (self._store.objects(info) for info in self._infos)
        for stored in roles:
            index.roles[(stored.namespace, stored.name)] = cast(Role, stored.obj())
        for stored in cluster_roles:
            index.cluster_roles[stored.name] = cast(Role, stored.obj())
        for stored in bindings:
            index.bind(stored.namespace, cast(RoleBinding, stored.obj()))
        for stored in cluster_bindings:
            index.bind("", cast(RoleBinding, stored.obj()))
        return index

    def _grants_of(self, who: UserInfo) -> Grants:
        grants = Grants()
        keys = [("User", who.username), *(("Group", group) for group in who.groups)]
        for key in keys:
            for namespace, ref in self._index.subjects.get(key, ()):
                rules = self._index.role_rules(namespace, ref)
                target = grants.namespaced.setdefault(namespace, []) if namespace else grants.cluster
                target.extend(rule for rule in rules if rule not in target)
        return grants
