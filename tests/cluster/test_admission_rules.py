"""Which requests a webhook rule covers, as tables: the cases of kube-apiserver's
`predicates/rules/rules_test.go` (groups, versions, operations, resources and subresources, scopes)."""

from __future__ import annotations

import pytest

from runtimekit.cluster.apiserver.admission.attributes import Resource
from runtimekit.cluster.apiserver.admission.rules import Rule

ANY = ("*",)


def rule(
    operations: tuple[str, ...] = ANY,
    groups: tuple[str, ...] = ANY,
    versions: tuple[str, ...] = ANY,
    resources: tuple[str, ...] = ("*/*",),
    scope: str = "*",
) -> Rule:
    return Rule(operations, groups, versions, resources, scope)


Request = tuple[str, str, str, str, str, str]  # operation, group, version, resource, subresource, namespace


def matches(r: Rule, request: Request) -> bool:
    operation, group, version, resource, subresource, namespace = request
    return r.matches(operation, Resource(group, version, resource), subresource, namespace)


def create(group: str = "g", version: str = "v", resource: str = "r", sub: str = "", namespace: str = "ns") -> Request:
    return ("CREATE", group, version, resource, sub, namespace)


CASES: list[tuple[str, Rule, list[Request], list[Request]]] = [
    ("group wildcard", rule(groups=ANY), [create("g")], []),
    ("group exact", rule(groups=("g1", "g2")), [create("g1"), create("g2", "v2", "r3")], [create("g3"), create("g4")]),
    ("version wildcard", rule(versions=ANY), [create()], []),
    (
        "version exact",
        rule(versions=("v1", "v2")),
        [create("g1", "v1"), create("g2", "v2")],
        [create("g1", "v3"), create("g2", "v4")],
    ),
    (
        "operation wildcard",
        rule(operations=ANY),
        [
            create(),
            ("UPDATE", "g", "v", "r", "", "ns"),
            ("DELETE", "g", "v", "r", "", "ns"),
            ("CONNECT", "g", "v", "r", "", "ns"),
        ],
        [],
    ),
    (
        "operation create",
        rule(operations=("CREATE",)),
        [create()],
        [("UPDATE", "g", "v", "r", "", "ns"), ("DELETE", "g", "v", "r", "", "ns")],
    ),
    (
        "operations update and delete",
        rule(operations=("UPDATE", "DELETE")),
        [("UPDATE", "g", "v", "r", "", "ns"), ("DELETE", "g", "v", "r", "", "ns")],
        [create(), ("CONNECT", "g", "v", "r", "", "ns")],
    ),
    (
        "no subresources",
        rule(resources=("*",)),
        [create(), create("2", "v", "r2")],
        [create(sub="exec"), create("2", "v", "r2", "proxy")],
    ),
    (
        "r and its subresources",
        rule(resources=("r/*",)),
        [create(), create(sub="exec")],
        [create("2", "v", "r2"), create("2", "v", "r2", "proxy")],
    ),
    (
        "r and its subresources, or r2",
        rule(resources=("r/*", "r2")),
        [create(), create(sub="exec"), create("2", "v", "r2")],
        [create("2", "v", "r2", "proxy")],
    ),
    (
        "proxy or exec",
        rule(resources=("*/proxy", "*/exec")),
        [create(sub="exec"), create("2", "v", "r2", "proxy"), create("2", "v", "r3", "proxy")],
        [create(), create("2", "v", "r2"), create("2", "v", "r4", "scale")],
    ),
    (
        "pods/binding",
        rule(resources=("pods/binding",)),
        [create("", "v1", "pods", "binding")],
        [create("", "v1", "pods"), create("", "v1", "pods", "status")],
    ),
    (
        "cluster scope",
        rule(resources=("*",), scope="Cluster"),
        [
            create(namespace=""),
            create("", "v1", "namespaces", namespace="ns"),
            create("", "v1", "namespaces", namespace=""),
        ],
        [create()],
    ),
    (
        "cluster scope with subresources",
        rule(resources=("*/*",), scope="Cluster"),
        [create(sub="exec", namespace=""), create("", "v1", "namespaces", "finalize", namespace="ns")],
        [create(sub="exec")],
    ),
    (
        "namespaced scope",
        rule(resources=("*/*",), scope="Namespaced"),
        [create(), create(sub="exec")],
        [
            create(namespace=""),
            create(sub="exec", namespace=""),
            create("", "v1", "namespaces", namespace="ns"),
            create("", "v1", "namespaces", "finalize", namespace="ns"),
        ],
    ),
    (
        "all scopes",
        rule(resources=("*/*",), scope="*"),
        [
            create(),
            create(namespace=""),
            create("", "v1", "namespaces", namespace="ns"),
            create(sub="exec", namespace=""),
        ],
        [],
    ),
]


@pytest.mark.parametrize(("name", "r", "yes", "no"), CASES, ids=[case[0] for case in CASES])
def test_rule_matches_as_kube_apiserver_does(name: str, r: Rule, yes: list[Request], no: list[Request]) -> None:
    for request in yes:
        assert matches(r, request), (name, request)
    for request in no:
        assert not matches(r, request), (name, request)


def test_a_rule_is_read_from_its_manifest_with_the_default_scope() -> None:
    read = Rule.of({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]})
    assert read == Rule(("CREATE",), ("",), ("v1",), ("pods",), "*")
