"""RBAC's rule matching, as kube-apiserver's RBAC authorizer evaluates a PolicyRule
(pkg/apis/rbac/v1/evaluation_helpers.go): verbs and API groups match exactly or by `*`; a resource
matches exactly (`pods`, `pods/binding`), by `*`, or by `*/<subresource>`; `resourceNames`, when
given, must hold the request's name (so a create, which has none, never matches such a rule);
`nonResourceURLs` match a path exactly or, ending in `*`, by prefix.

`Attributes` is what a request asks (kube's authorizer.Attributes); `Rule` is one compiled PolicyRule;
`Grants` is the rules one user holds, cluster-wide and per namespace, with the decisions already
taken memoised. Pure values; called by `authorizer` and `reviews`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from runtimekit.kube.objects.rbac import NonResourceRule, PolicyRule, ResourceRule

ALL = "*"
_MEMO_LIMIT = 4096  # decisions kept per user; names make the key space open-ended


class Attributes(NamedTuple):
    """One request's question: may the user `verb` this resource (or, `path` set, this URL)?
    `namespace` is "" at the cluster scope. A tuple: every request makes one and hashes it."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return not self.path

    @property
    def combined(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Rule:
    verbs: frozenset[str]
    groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: PolicyRule) -> Rule:
        return cls(
            frozenset(rule.get("verbs") or ()),
            frozenset(rule.get("apiGroups") or ()),
            frozenset(rule.get("resources") or ()),
            frozenset(rule.get("resourceNames") or ()),
            tuple(rule.get("nonResourceURLs") or ()),
        )

    def allows(self, asked: Attributes) -> bool:
        if ALL not in self.verbs and asked.verb not in self.verbs:
            return False
        if not asked.resource_request:
            return any(
                url in (ALL, asked.path) or (url.endswith(ALL) and asked.path.startswith(url[:-1])) for url in self.urls
            )
        if ALL not in self.groups and asked.group not in self.groups:
            return False
        if not self._resource_matches(asked):
            return False
        return not self.names or asked.name in self.names

    def _resource_matches(self, asked: Attributes) -> bool:
        resources = self.resources
        if ALL in resources or asked.combined in resources:
            return True
        return bool(asked.subresource) and f"*/{asked.subresource}" in resources

    def resource_rule(self) -> ResourceRule:
        out: ResourceRule = {
            "verbs": sorted(self.verbs),
            "apiGroups": sorted(self.groups),
            "resources": sorted(self.resources),
        }
        if self.names:
            out["resourceNames"] = sorted(self.names)
        return out

    def non_resource_rule(self) -> NonResourceRule:
        return {"verbs": sorted(self.verbs), "nonResourceURLs": list(self.urls)}


def compile_rules(rules: Iterable[PolicyRule]) -> tuple[Rule, ...]:
    return tuple(Rule.of(rule) for rule in rules)


@dataclass
class Grants:
    """What one user may do: `cluster` rules hold everywhere, `namespaced[ns]` only in `ns`."""

    cluster: list[Rule] = field(default_factory=list)
    namespaced: dict[str, list[Rule]] = field(default_factory=dict)
    memo: dict[Attributes, bool] = field(default_factory=dict)

    def allows(self, asked: Attributes) -> bool:
        known = self.memo.get(asked)
        if known is not None:
            return known
        decision = _any(self.cluster, asked) or (
            bool(asked.namespace) and _any(self.namespaced.get(asked.namespace, ()), asked)
        )
        if len(self.memo) >= _MEMO_LIMIT:
            self.memo.clear()
        self.memo[asked] = decision
        return decision

    def rules_in(self, namespace: str) -> list[Rule]:
        """The rules that hold in `namespace` (cluster-wide ones first), as SelfSubjectRulesReview lists them."""
        return [*self.cluster, *self.namespaced.get(namespace, ())]


def _any(rules: Sequence[Rule], asked: Attributes) -> bool:
    return any(rule.allows(asked) for rule in rules)
