"""RBAC's rule matching and the authorizer over the store, in process: the cases of kube's
evaluation_helpers_test.go and rbac_test.go (verbs and groups by `*`, `*/<subresource>`, resourceNames
that never match a create or a list, nonResourceURL prefixes), bindings by user, group and
ServiceAccount, and the cached decisions following every change of an RBAC object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.authz.rules import Attributes, Rule
from runtimekit.cluster.apiserver.deletion import DeleteOptions, delete
from runtimekit.cluster.apiserver.identity import UserInfo, service_account, user
from runtimekit.kube.objects.rbac import PolicyRule

RBAC = "rbac.authorization.k8s.io"


def rule(**fields: Any) -> Rule:
    return Rule.of(cast(PolicyRule, fields))


PODS_GET = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}


@pytest.mark.parametrize(
    ("policy", "asked", "allowed"),
    [
        (PODS_GET, Attributes("get", "", "pods"), True),
        (PODS_GET, Attributes("list", "", "pods"), False),
        (PODS_GET, Attributes("get", "apps", "pods"), False),
        (PODS_GET, Attributes("get", "", "pods", "status"), False),
        ({**PODS_GET, "verbs": ["*"]}, Attributes("deletecollection", "", "pods"), True),
        ({**PODS_GET, "apiGroups": ["*"]}, Attributes("get", "apps", "pods"), True),
        ({**PODS_GET, "resources": ["*"]}, Attributes("get", "", "pods", "log"), True),
        ({**PODS_GET, "resources": ["*/log"]}, Attributes("get", "", "pods", "log"), True),
        ({**PODS_GET, "resources": ["*/log"]}, Attributes("get", "", "pods"), False),
        ({**PODS_GET, "resources": ["pods/log"]}, Attributes("get", "", "pods", "log"), True),
        ({**PODS_GET, "resourceNames": ["a"]}, Attributes("get", "", "pods", name="a"), True),
        ({**PODS_GET, "resourceNames": ["a"]}, Attributes("get", "", "pods", name="b"), False),
        ({**PODS_GET, "verbs": ["create"], "resourceNames": ["a"]}, Attributes("create", "", "pods"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, Attributes("get", path="/healthz"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, Attributes("get", path="/healthz/etcd"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}, Attributes("get", path="/healthz/etcd"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["*"]}, Attributes("get", path="/anything"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["*"]}, Attributes("get", "", "pods"), False),
        (PODS_GET, Attributes("get", path="/api/v1/pods"), False),
    ],
    ids=lambda value: repr(value) if isinstance(value, Attributes) else None,
)
def test_a_rule_matches_as_kube_evaluates_it(policy: dict[str, Any], asked: Attributes, allowed: bool) -> None:
    assert rule(**policy).allows(asked) is allowed


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(seed=1) as started:
        started.api.create(started.api.resource("", "v1", "namespaces"), "", {"metadata": {"name": "team"}})
        yield started


def create(server: ApiServer, plural: str, obj: dict[str, Any], namespace: str = "") -> None:
    server.api.create(server.api.resource(RBAC, "v1", plural), namespace, obj)


def binding(name: str, role_kind: str, role: str, *subjects: dict[str, str], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
    return {
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": list(subjects),
    }


LIST_PODS = Attributes("list", "", "pods", namespace="team")
ROBOT = service_account("team", "robot")


def test_bindings_by_user_group_and_service_account_and_their_scope(server: ApiServer) -> None:
    authorizer = server.access.authorizer
    jane, dev = user("jane"), UserInfo("bob", ("devs", "system:authenticated"))
    assert not any(authorizer.allowed(who, LIST_PODS) for who in (jane, dev, ROBOT))
    create(
        server, "roles", {"metadata": {"name": "r", "namespace": "team"}, "rules": [{**PODS_GET, "verbs": ["list"]}]}
    )
    create(server, "rolebindings", binding("b", "Role", "r", {"kind": "User", "name": "jane"}, namespace="team"))
    assert authorizer.allowed(jane, LIST_PODS)
    assert not authorizer.allowed(jane, Attributes("list", "", "pods", namespace="other"))
    create(
        server, "rolebindings", binding("g", "ClusterRole", "view", {"kind": "Group", "name": "devs"}, namespace="team")
    )
    assert authorizer.allowed(dev, LIST_PODS)
    assert not authorizer.allowed(dev, Attributes("list", "", "pods", namespace="other"))
    account = {"kind": "ServiceAccount", "name": "robot", "namespace": "team"}
    create(server, "clusterrolebindings", binding("sa", "ClusterRole", "edit", account))
    assert authorizer.allowed(ROBOT, Attributes("create", "", "pods", namespace="anywhere"))
    assert not authorizer.allowed(ROBOT, Attributes("create", "", "nodes"))
    assert not authorizer.allowed(service_account("other", "robot"), LIST_PODS)


def test_decisions_follow_a_changed_or_deleted_role(server: ApiServer) -> None:
    authorizer, jane = server.access.authorizer, user("jane")
    roles = server.api.resource(RBAC, "v1", "roles")
    create(
        server, "roles", {"metadata": {"name": "r", "namespace": "team"}, "rules": [{**PODS_GET, "verbs": ["list"]}]}
    )
    create(server, "rolebindings", binding("b", "Role", "r", {"kind": "User", "name": "jane"}, namespace="team"))
    assert authorizer.allowed(jane, LIST_PODS)
    changed = {"metadata": {"name": "r", "namespace": "team"}, "rules": [{**PODS_GET, "verbs": ["get"]}]}
    server.api.update(roles, "team", "r", changed)
    assert not authorizer.allowed(jane, LIST_PODS)
    assert authorizer.allowed(jane, Attributes("get", "", "pods", namespace="team", name="x"))
    delete(server.api, roles, "team", "r", DeleteOptions.parse(None, {}))
    assert not authorizer.allowed(jane, Attributes("get", "", "pods", namespace="team", name="x"))


def test_system_masters_may_do_anything_without_a_binding(server: ApiServer) -> None:
    assert server.access.authorizer.allowed(UserInfo("root", ("system:masters",)), Attributes("escalate", "x", "y"))


def test_the_bootstrap_policy_is_stored_and_aggregated(server: ApiServer) -> None:
    roles = server.api.resource(RBAC, "v1", "clusterroles")
    names = {stored.name for stored in server.store.objects(roles)}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user"} <= names
    grants = server.access.authorizer.grants(user("nobody"))
    assert not grants.allows(LIST_PODS)
    assert grants.allows(Attributes("create", "authorization.k8s.io", "selfsubjectaccessreviews"))
    create(server, "clusterrolebindings", binding("v", "ClusterRole", "admin", {"kind": "User", "name": "nobody"}))
    admin = server.access.authorizer.grants(user("nobody"))
    for verb, resource, group in [("list", "pods", ""), ("delete", "deployments", "apps"), ("create", "roles", RBAC)]:
        assert admin.allows(Attributes(verb, group, resource, namespace="team")), (verb, resource)
    assert not admin.allows(Attributes("create", "", "nodes"))
