"""RBAC, the review kinds and the bootstrap objects, seen through the real kubectl (`auth can-i`,
`auth can-i --list`, `auth whoami`, `--as`/`--as-group`, `create serviceaccount`, `create token`) and
plain HTTP with bearer tokens. The expected texts are kube-apiserver's and kubectl's (the RBAC docs'
examples, kubectl's `auth` command tests)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from fixtures.apiserver import Kubectl, shared_kubectl
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.identity import user

RBAC = "rbac.authorization.k8s.io"
POD_READER = f"""\
apiVersion: {RBAC}/v1
kind: Role
metadata: {{name: pod-reader, namespace: default}}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [app-config]
  verbs: [get]
---
apiVersion: {RBAC}/v1
kind: RoleBinding
metadata: {{name: read-pods, namespace: default}}
subjects:
- kind: User
  name: jane
  apiGroup: {RBAC}
roleRef:
  kind: Role
  name: pod-reader
  apiGroup: {RBAC}
"""


BINDING = f"""\
apiVersion: {RBAC}/v1
kind: ClusterRoleBinding
metadata: {{{{name: {{role}}}}}}
roleRef: {{{{apiGroup: {RBAC}, kind: ClusterRole, name: {{role}}}}}}
subjects: [{{{{apiGroup: {RBAC}, kind: User, name: {{user}}}}}}]
"""


@pytest.fixture(scope="module")
def jane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    """One server with jane's Role for the module: the tests using it only ask, or are refused."""
    with shared_kubectl(tmp_path_factory.mktemp("jane")) as kubectl:
        kubectl("apply", "-f", "-", stdin=POD_READER)
        yield kubectl


def can_i(kubectl: Kubectl, *args: str) -> str:
    done = kubectl("auth", "can-i", *args, check=False)
    assert done.returncode == (0 if done.stdout.strip() == "yes" else 1), done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("list", "pods", "--as", "jane"), "yes"),
        (("watch", "pods", "--as", "jane"), "yes"),
        (("delete", "pods", "--as", "jane"), "no"),
        (("list", "pods", "--as", "jane", "-n", "kube-system"), "no"),
        (("list", "pods", "--as", "jane", "--all-namespaces"), "no"),
        (("get", "configmaps/app-config", "--as", "jane"), "yes"),
        (("get", "configmaps/other", "--as", "jane"), "no"),
        (("list", "configmaps", "--as", "jane"), "no"),  # resourceNames never allow a list of all
        (("get", "/healthz", "--as", "jane"), "yes"),  # system:public-info-viewer
        (("get", "/api", "--as", "jane"), "yes"),  # system:discovery
        (("get", "/metrics", "--as", "jane"), "no"),
        (("create", "pods", "--as", "jane", "--as-group", "system:masters"), "yes"),
        (("create", "nodes"), "yes"),  # the admin
        (("*", "*"), "yes"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else value,
)
def test_can_i_answers_as_rbac_decides(jane: Kubectl, args: tuple[str, ...], answer: str) -> None:
    assert can_i(jane, *args) == answer


def test_a_user_limited_by_a_role_gets_kubes_403(jane: Kubectl) -> None:
    assert jane("get", "pods", "--as", "jane").returncode == 0
    refused = jane("get", "pods", "-n", "kube-system", "--as", "jane", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "jane" cannot list resource "pods" in API group "" '
        'in the namespace "kube-system"'
    )
    nodes = jane("get", "nodes", "--as", "jane", check=False).stderr.strip()
    assert nodes == (
        'Error from server (Forbidden): nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" '
        "at the cluster scope"
    )
    named = jane("get", "configmap", "other", "--as", "jane", check=False).stderr.strip()
    assert named == (
        'Error from server (Forbidden): configmaps "other" is forbidden: User "jane" cannot get resource '
        '"configmaps" in API group "" in the namespace "default"'
    )
    deploy = jane("create", "deployment", "web", "--image=nginx", "--as", "jane", check=False).stderr.strip()
    assert deploy == (
        'error: failed to create deployment: deployments.apps is forbidden: User "jane" cannot create resource '
        '"deployments" in API group "apps" in the namespace "default"'
    )


def test_can_i_list_shows_the_rules_of_the_namespace(jane: Kubectl) -> None:
    rows = [line.split() for line in jane("auth", "can-i", "--list", "--as", "jane").stdout.splitlines()]
    assert rows[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["pods", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["configmaps", "[]", "[app-config]", "[get]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/version]", "[]", "[get]"] in rows
    elsewhere = jane("auth", "can-i", "--list", "--as", "jane", "-n", "kube-system").stdout
    assert "pods " not in elsewhere


def test_whoami_names_the_impersonated_user_and_groups(kubectl: Kubectl) -> None:
    admin = kubectl("auth", "whoami").stdout.split()
    assert admin == [
        "ATTRIBUTE",
        "VALUE",
        "Username",
        "kubernetes-admin",
        "Groups",
        "[system:masters",
        "system:authenticated]",
    ]
    someone = kubectl("auth", "whoami", "--as", "bob", "--as-group", "devs", "-o", "json").stdout
    assert '"username": "bob"' in someone
    assert '"devs",\n' in someone
    assert '"system:authenticated"' in someone


def test_a_group_binding_and_aggregation_into_view(kubectl: Kubectl) -> None:
    kubectl("create", "clusterrolebinding", "devs-view", "--clusterrole=view", "--group=devs")
    as_dev = ("--as", "bob", "--as-group", "devs", "-n", "team")
    assert can_i(kubectl, "list", "deployments.apps", *as_dev) == "yes"
    assert can_i(kubectl, "create", "deployments.apps", *as_dev) == "no"
    assert can_i(kubectl, "list", "leases.coordination.k8s.io", *as_dev) == "no"
    kubectl("create", "clusterrole", "lease-viewer", "--verb=list", "--resource=leases.coordination.k8s.io")
    kubectl("label", "clusterrole", "lease-viewer", f"{RBAC}/aggregate-to-view=true")
    assert can_i(kubectl, "list", "leases.coordination.k8s.io", *as_dev) == "yes"  # view took the new role in
    kubectl("delete", "clusterrolebinding", "devs-view")
    assert can_i(kubectl, "list", "deployments.apps", *as_dev) == "no"


def test_subresources_and_wildcards(kubectl: Kubectl) -> None:
    kubectl("create", "clusterrole", "binder", "--verb=create", "--resource=pods/binding")
    kubectl("create", "clusterrole", "any-status", "--verb=patch", "--resource=*/status")
    for role in ("binder", "any-status"):
        kubectl("apply", "-f", "-", stdin=BINDING.format(role=role, user="sched"))
    assert can_i(kubectl, "create", "pods", "--subresource=binding", "--as", "sched") == "yes"
    assert can_i(kubectl, "create", "pods", "--as", "sched") == "no"
    assert can_i(kubectl, "patch", "pods", "--subresource=status", "--as", "sched") == "yes"
    assert can_i(kubectl, "patch", "services", "--subresource=status", "--as", "sched") == "yes"
    assert can_i(kubectl, "patch", "services", "--as", "sched") == "no"
    # kubectl create clusterrole puts a resource without a group in the core group
    assert can_i(kubectl, "patch", "deployments.apps", "--subresource=status", "--as", "sched") == "no"


def test_service_accounts_their_tokens_and_their_groups(
    apiserver: ApiServer, kubectl: Kubectl, kube_http: httpx2.Client
) -> None:
    kubectl("create", "serviceaccount", "robot")
    token = kubectl("create", "token", "robot").stdout.strip()
    auth = {"Authorization": f"Bearer {token}"}
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answered = kube_http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review, headers=auth)
    assert answered.status_code == 201
    assert answered.json()["status"]["userInfo"] == {
        "username": "system:serviceaccount:default:robot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    }
    refused = kube_http.get("/api/v1/namespaces/default/pods", headers=auth)
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        'pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    )
    assert refused.json()["details"] == {"kind": "pods"}
    kubectl("create", "rolebinding", "robots-edit", "--clusterrole=edit", "--group=system:serviceaccounts")
    assert kube_http.get("/api/v1/namespaces/default/pods", headers=auth).status_code == 200
    assert can_i(kubectl, "create", "pods", "--as", "system:serviceaccount:default:robot") == "yes"
    assert can_i(kubectl, "create", "pods", "--as", "system:serviceaccount:default:robot", "-n", "x") == "no"
    assert kubectl("create", "token", "nobody", check=False).stderr.strip() == (
        'error: failed to create token: serviceaccounts "nobody" not found'
    )


def test_only_who_may_impersonate_does(apiserver: ApiServer, kube_http: httpx2.Client) -> None:
    token = apiserver.identities.issue(user("jane"))
    headers = {"Authorization": f"Bearer {token}", "Impersonate-User": "admin"}
    refused = kube_http.get("/api/v1/namespaces", headers=headers)
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        'users "admin" is forbidden: User "jane" cannot impersonate resource "users" in API group "" '
        "at the cluster scope"
    )
    anonymous = kube_http.get("/api", headers={"Authorization": "Bearer not-ours"})
    assert anonymous.status_code == 403
    assert anonymous.json()["message"] == 'forbidden: User "system:anonymous" cannot get path "/api"'
    assert kube_http.get("/healthz", headers={"Authorization": "Bearer not-ours"}).status_code == 200


def test_subject_access_reviews(kube_http: httpx2.Client, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=POD_READER)  # jane's Role on this test's own server, which kube_http asks
    base = "/apis/authorization.k8s.io/v1"
    ask = {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}, "user": "jane"}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": ask}
    assert kube_http.post(f"{base}/subjectaccessreviews", json=review).json()["status"] == {"allowed": True}
    ask["user"] = "john"
    assert kube_http.post(f"{base}/subjectaccessreviews", json=review).json()["status"] == {"allowed": False}
    local = {**review, "kind": "LocalSubjectAccessReview"}
    wrong = kube_http.post(f"{base}/namespaces/other/localsubjectaccessreviews", json=local)
    assert wrong.status_code == 400
    assert wrong.json()["message"] == "spec.resourceAttributes.namespace must match namespace: other"
    assert kube_http.post(f"{base}/namespaces/default/localsubjectaccessreviews", json=local).status_code == 201


def test_every_namespace_has_its_default_account_and_root_ca(apiserver: ApiServer, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team")
    for namespace in ("default", "kube-system", "team"):
        assert (
            kubectl("get", "serviceaccount", "default", "-n", namespace, "-o", "name").stdout
            == "serviceaccount/default\n"
        )
        ca = kubectl("get", "configmap", "kube-root-ca.crt", "-n", namespace, "-o", "jsonpath={.data.ca\\.crt}").stdout
        assert ca.startswith("-----BEGIN CERTIFICATE-----")
    cas = {
        kubectl("get", "cm", "kube-root-ca.crt", "-n", ns, "-o", "jsonpath={.data}").stdout
        for ns in ("default", "team")
    }
    assert len(cas) == 1  # one CA for the cluster
    service = kubectl(
        "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP} {.spec.ports[0].name} {.spec.ports[0].port}"
    )
    assert service.stdout == "10.96.0.1 https 443"
    endpoints = kubectl(
        "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}"
    )
    assert endpoints.stdout == f"127.0.0.1:{apiserver.port}"
