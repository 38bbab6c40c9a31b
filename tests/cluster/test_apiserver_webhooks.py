"""The embedded API server calls admission webhooks as kube-apiserver does: a real HTTPS webhook in the
test (tests/fixtures/webhooks.py), configurations created through the API, requests made over HTTP.
Rules, selectors, failure policies, timeouts, reinvocation, dry runs, patches, warnings, who asks, and
kube-apiserver's messages."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import make_pod
from fixtures.webhooks import WebhookServer, client_config, deny, mutating, patch, validating, warn
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.identity import service_account

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"


def register(http: httpx2.Client, config: dict[str, Any]) -> None:
    plural = (
        "mutatingwebhookconfigurations" if config["kind"].startswith("Mutating") else "validatingwebhookconfigurations"
    )
    answer = http.post(f"{ADMISSION}/{plural}", json=config)
    assert answer.status_code == 201, answer.text


def create_pod(http: httpx2.Client, name: str = "p", **fields: Any) -> httpx2.Response:
    return http.post(PODS, json=make_pod(name, **fields))


def test_a_mutating_webhooks_patch_is_applied_and_it_saw_the_defaulted_pod(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    webhook_server.answers["/m"] = patch({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
    register(kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m")))
    answer = create_pod(kube_http, labels={"app": "x"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["metadata"]["labels"] == {"app": "x", "mutated": "yes"}
    (request,) = webhook_server.requests("/m")
    assert request["operation"] == "CREATE"
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["object"]["spec"]["schedulerName"] == "default-scheduler"  # the pod's defaults come first
    assert request["oldObject"] is None
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert request["dryRun"] is False


def test_a_refusal_is_kube_apiservers_message_with_the_webhooks_code(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    webhook_server.answers["/v"] = deny("no GPUs today")
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v")))
    answer = create_pod(kube_http)
    assert answer.status_code == 403
    body = answer.json()
    assert body["message"] == 'admission webhook "v.example.com" denied the request: no GPUs today'
    assert body["reason"] == "Forbidden"
    webhook_server.answers["/v"] = deny("too big", code=422)
    assert create_pod(kube_http, "q").status_code == 422
    webhook_server.answers["/v"] = lambda _request: {"allowed": False}
    assert create_pod(kube_http, "r").json()["message"] == (
        'admission webhook "v.example.com" denied the request without explanation'
    )
    assert kube_http.get(f"{PODS}/p").status_code == 404


def test_mutating_webhooks_run_before_validating_ones(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    webhook_server.answers["/m"] = patch({"op": "add", "path": "/metadata/annotations", "value": {"seen": "m"}})
    register(kube_http, validating("a-first-by-name", "v.example.com", client_config(webhook_server, "/v")))
    register(kube_http, mutating("z-last-by-name", "m.example.com", client_config(webhook_server, "/m")))
    assert create_pod(kube_http).status_code == 201
    assert webhook_server.paths() == ["/m", "/v"]
    (validated,) = webhook_server.requests("/v")
    assert validated["object"]["metadata"]["annotations"] == {"seen": "m"}
    assert validated["object"]["metadata"]["uid"]  # validating webhooks see the object as it is stored


@pytest.mark.parametrize(
    ("policy", "created"),
    [("Fail", False), ("Ignore", True)],
)
def test_an_unreachable_webhook_fails_the_request_or_is_ignored_by_its_policy(
    kube_http: httpx2.Client, webhook_server: WebhookServer, policy: str, created: bool
) -> None:
    dead = {"url": "https://127.0.0.1:9/v", "caBundle": webhook_server.ca_bundle}
    register(kube_http, validating("v", "v.example.com", dead, failurePolicy=policy))
    answer = create_pod(kube_http)
    if created:
        assert answer.status_code == 201
        return
    assert answer.status_code == 500
    assert answer.json()["message"] == (
        'Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: '
        'Post "https://127.0.0.1:9/v?timeout=10s": dial tcp 127.0.0.1:9: connect: connection refused'
    )


@pytest.mark.parametrize(("policy", "code"), [("Fail", 500), ("Ignore", 201)])
def test_a_webhook_past_its_timeout_is_a_failure_to_call_it(
    kube_http: httpx2.Client, webhook_server: WebhookServer, policy: str, code: int
) -> None:
    webhook_server.delays["/slow"] = 1.5
    register(
        kube_http,
        validating(
            "v", "v.example.com", client_config(webhook_server, "/slow"), failurePolicy=policy, timeoutSeconds=1
        ),
    )
    started = time.monotonic()
    answer = create_pod(kube_http)
    assert answer.status_code == code
    assert time.monotonic() - started < 1.45
    if code == 500:
        assert answer.json()["message"].endswith('/slow?timeout=1s": context deadline exceeded')


def test_a_webhook_signed_by_another_ca_cannot_be_called(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    import trustme

    stranger = base64.b64encode(trustme.CA().cert_pem.bytes()).decode()
    register(kube_http, validating("v", "v.example.com", {"url": webhook_server.url + "/v", "caBundle": stranger}))
    answer = create_pod(kube_http)
    assert answer.status_code == 500
    assert "x509: certificate signed by unknown authority" in answer.json()["message"]


def test_ifneeded_webhooks_run_again_after_a_later_one_changes_the_object(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    def count(request: dict[str, Any]) -> dict[str, Any]:
        return {}

    webhook_server.answers["/a"] = count
    webhook_server.answers["/b"] = patch({"op": "add", "path": "/metadata/labels", "value": {"b": "1"}})
    register(
        kube_http, mutating("a", "a.example.com", client_config(webhook_server, "/a"), reinvocationPolicy="IfNeeded")
    )
    register(kube_http, mutating("b", "b.example.com", client_config(webhook_server, "/b")))
    register(kube_http, mutating("c", "c.example.com", client_config(webhook_server, "/c"), reinvocationPolicy="Never"))
    assert create_pod(kube_http).status_code == 201
    assert webhook_server.paths() == ["/a", "/b", "/c", "/a"]  # a again, with b's change; b and c not
    assert webhook_server.requests("/a")[1]["object"]["metadata"]["labels"] == {"b": "1"}


def test_without_a_change_no_webhook_runs_twice(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    register(
        kube_http, mutating("a", "a.example.com", client_config(webhook_server, "/a"), reinvocationPolicy="IfNeeded")
    )
    register(kube_http, mutating("b", "b.example.com", client_config(webhook_server, "/b")))
    assert create_pod(kube_http).status_code == 201
    assert webhook_server.paths() == ["/a", "/b"]


@pytest.mark.parametrize(
    ("side_effects", "outcome"),
    [("None", 201), ("NoneOnDryRun", 201), ("Some", 400), ("Unknown", 400)],
)
def test_a_dry_run_reaches_only_webhooks_without_side_effects(
    apiserver: ApiServer, kube_http: httpx2.Client, webhook_server: WebhookServer, side_effects: str, outcome: int
) -> None:
    config = validating("v", "v.example.com", client_config(webhook_server, "/v"))
    config["webhooks"][0]["sideEffects"] = side_effects
    # v1 refuses Some and Unknown on write; a configuration stored earlier (v1beta1) may still have them
    if side_effects in ("Some", "Unknown"):
        assert kube_http.post(f"{ADMISSION}/validatingwebhookconfigurations", json=config).status_code == 422
        config["webhooks"][0]["sideEffects"] = "None"
        register(kube_http, config)
        stored = kube_http.get(f"{ADMISSION}/validatingwebhookconfigurations/v").json()
        stored["webhooks"][0]["sideEffects"] = side_effects
        _store_unchecked(apiserver, stored)
    else:
        register(kube_http, config)
    answer = kube_http.post(PODS, params={"dryRun": "All"}, json=make_pod("p"))
    assert answer.status_code == outcome, answer.text
    if outcome == 400:
        assert answer.json()["message"] == 'admission webhook "v.example.com" does not support dry run'
        assert webhook_server.reviews == []
    else:
        assert webhook_server.requests("/v")[0]["dryRun"] is True
    assert kube_http.get(f"{PODS}/p").status_code == 404


def _store_unchecked(server: ApiServer, obj: dict[str, Any]) -> None:
    """Write a configuration past validation, as one kept from an older API version would be."""
    api = server.api
    info = api.resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
    with api.store.lock:
        current = api.get(info, "", obj["metadata"]["name"])
        api.store.put(info, obj, current)


def test_warnings_reach_the_client_as_warning_headers(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    webhook_server.answers["/m"] = warn("one is enough")
    webhook_server.answers["/v"] = warn('say "two"')
    register(kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m")))
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v")))
    answer = create_pod(kube_http)
    assert answer.status_code == 201
    assert answer.headers.get_list("Warning") == ['299 - "one is enough"', '299 - "say \\"two\\""']


RBAC = "/apis/rbac.authorization.k8s.io/v1"


def test_the_webhook_knows_who_asks(
    apiserver: ApiServer, kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    scheduler = service_account("kube-system", "lj-runtimekit-scheduler")
    token = apiserver.identities.issue(scheduler)
    may_create_pods = {
        "metadata": {"name": "create-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "lj-runtimekit-scheduler", "namespace": "kube-system"},
            {"kind": "User", "name": "system:anonymous"},
        ],
    }
    assert kube_http.post(f"{RBAC}/namespaces/default/rolebindings", json=may_create_pods).status_code == 201
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v")))
    assert create_pod(kube_http, "no-credentials").status_code == 201
    kube_http.post(PODS, json=make_pod("named"), headers={"Authorization": f"Bearer {token}"})
    kube_http.post(PODS, json=make_pod("stranger"), headers={"Authorization": "Bearer not-a-token-we-gave"})
    users = [r["userInfo"] for r in webhook_server.requests("/v")]
    assert users[0] == {"username": "kubernetes-admin", "uid": "", "groups": ["system:masters", "system:authenticated"]}
    assert users[1]["username"] == "system:serviceaccount:kube-system:lj-runtimekit-scheduler"
    assert users[1]["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        "system:authenticated",
    ]
    assert users[2] == {"username": "system:anonymous", "uid": "", "groups": ["system:unauthenticated"]}


def test_the_admin_kubeconfig_is_kubernetes_admin(
    apiserver: ApiServer, webhook_server: WebhookServer, tmp_path: Any
) -> None:
    import yaml

    from runtimekit.kube.http import KubeHttp

    path = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    http = KubeHttp.connect(kubeconfig=str(path))
    try:
        http.post(
            f"{ADMISSION}/validatingwebhookconfigurations",
            validating("v", "v.example.com", client_config(webhook_server, "/v")),
        )
        http.post(PODS, make_pod("p"))
    finally:
        http.close()
    assert token
    (request,) = webhook_server.requests("/v")
    assert request["userInfo"]["username"] == "kubernetes-admin"
    assert request["userInfo"]["groups"] == ["system:masters", "system:authenticated"]


def rule(
    operations: list[str], resources: list[str], group: str = "", version: str = "v1", **extra: Any
) -> dict[str, Any]:
    return {"operations": operations, "apiGroups": [group], "apiVersions": [version], "resources": resources, **extra}


def test_subresource_rules_reach_bindings_and_status_and_only_them(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    register(
        kube_http,
        validating("b", "b.example.com", client_config(webhook_server, "/b"), [rule(["CREATE"], ["pods/binding"])]),
    )
    register(
        kube_http,
        validating("s", "s.example.com", client_config(webhook_server, "/s"), [rule(["UPDATE"], ["*/status"])]),
    )
    assert create_pod(kube_http).status_code == 201
    assert webhook_server.reviews == []  # a pod create is neither
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "annotations": {"a": "b"}},
        "target": {"kind": "Node", "name": "n1"},
    }
    assert kube_http.post(f"{PODS}/p/binding", json=binding).status_code == 201
    (bound,) = webhook_server.requests("/b")
    assert (bound["operation"], bound["subResource"], bound["name"], bound["namespace"]) == (
        "CREATE",
        "binding",
        "p",
        "default",
    )
    assert bound["kind"] == {"group": "", "version": "v1", "kind": "Binding"}
    assert bound["resource"]["resource"] == "pods"
    assert bound["object"]["target"]["name"] == "n1"
    pod = kube_http.get(f"{PODS}/p").json()
    pod["status"]["phase"] = "Running"
    assert kube_http.put(f"{PODS}/p/status", json=pod).status_code == 200
    (status,) = webhook_server.requests("/s")
    assert (status["operation"], status["subResource"]) == ("UPDATE", "status")
    assert status["oldObject"]["status"]["phase"] == "Pending"
    assert status["object"]["status"]["phase"] == "Running"


def test_a_refused_binding_leaves_the_pod_unbound(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    webhook_server.answers["/b"] = deny("not you")
    register(
        kube_http,
        validating("b", "b.example.com", client_config(webhook_server, "/b"), [rule(["CREATE"], ["pods/binding"])]),
    )
    assert create_pod(kube_http).status_code == 201
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    answer = kube_http.post(f"{PODS}/p/binding", json=binding)
    assert answer.status_code == 403
    assert "not you" in answer.json()["message"]
    assert not kube_http.get(f"{PODS}/p").json()["spec"].get("nodeName")


def test_update_patch_and_delete_carry_the_old_object(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    assert create_pod(kube_http, labels={"v": "1"}).status_code == 201
    register(
        kube_http,
        validating("v", "v.example.com", client_config(webhook_server, "/v"), [rule(["UPDATE", "DELETE"], ["pods"])]),
    )
    answer = kube_http.patch(
        f"{PODS}/p",
        content=json.dumps({"metadata": {"labels": {"v": "2"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200, answer.text
    assert kube_http.delete(f"{PODS}/p").status_code == 200
    patched, deleted = webhook_server.requests("/v")
    assert patched["operation"] == "UPDATE"
    assert (patched["oldObject"]["metadata"]["labels"], patched["object"]["metadata"]["labels"]) == (
        {"v": "1"},
        {"v": "2"},
    )
    assert patched["options"]["kind"] == "UpdateOptions"
    assert deleted["operation"] == "DELETE"
    assert deleted["object"] is None
    assert deleted["oldObject"]["metadata"]["labels"] == {"v": "2"}
    assert deleted["options"]["kind"] == "DeleteOptions"


def test_a_refused_update_or_delete_changes_nothing(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    assert create_pod(kube_http, labels={"v": "1"}).status_code == 201
    webhook_server.answers["/v"] = deny("frozen")
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v"), [rule(["*"], ["pods"])]))
    pod = kube_http.get(f"{PODS}/p").json()
    pod["metadata"]["labels"] = {"v": "2"}
    assert kube_http.put(f"{PODS}/p", json=pod).status_code == 403
    assert kube_http.delete(f"{PODS}/p").status_code == 403
    assert kube_http.get(f"{PODS}/p").json()["metadata"]["labels"] == {"v": "1"}


def test_a_mutating_webhook_may_not_patch_a_delete(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    assert create_pod(kube_http).status_code == 201
    webhook_server.answers["/m"] = patch({"op": "add", "path": "/metadata/labels", "value": {}})
    register(
        kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m"), [rule(["DELETE"], ["pods"])])
    )
    answer = kube_http.delete(f"{PODS}/p")
    assert answer.status_code == 500
    assert answer.json()["message"] == (
        'Internal error occurred: admission webhook "m.example.com" attempted to modify the object, '
        "which is not supported for this operation"
    )


def test_a_patch_that_does_not_apply_is_an_internal_error(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    webhook_server.answers["/m"] = patch({"op": "replace", "path": "/spec/nothingHere", "value": 1})
    register(kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m"), failurePolicy="Ignore"))
    answer = create_pod(kube_http)
    assert answer.status_code == 500  # not a failure to call the webhook: Ignore does not apply
    assert answer.json()["reason"] == "InternalError"


@pytest.mark.parametrize(
    ("response", "why"),
    [
        ({"uid": "someone-else", "allowed": True}, 'expected response.uid="'),
        ({"allowed": True, "patch": "W10="}, "webhook returned response.patch but not response.patchType"),
    ],
)
def test_a_malformed_answer_is_a_failure_to_call_the_webhook(
    kube_http: httpx2.Client, webhook_server: WebhookServer, response: dict[str, Any], why: str
) -> None:
    webhook_server.answers["/m"] = lambda _request: dict(response)
    register(kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m")))
    answer = create_pod(kube_http)
    assert answer.status_code == 500
    assert answer.json()["message"].startswith(
        'Internal error occurred: failed calling webhook "m.example.com": received invalid webhook response: ' + why
    )
    config = kube_http.get(f"{ADMISSION}/mutatingwebhookconfigurations/m").json()
    config["webhooks"][0]["failurePolicy"] = "Ignore"
    assert kube_http.put(f"{ADMISSION}/mutatingwebhookconfigurations/m", json=config).status_code == 200
    assert create_pod(kube_http).status_code == 201


def test_selectors_choose_namespaces_and_objects(kube_http: httpx2.Client, webhook_server: WebhookServer) -> None:
    for name, labels in (("gpu", {"team": "gpu"}), ("web", {"team": "web"})):
        kube_http.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}})
    register(
        kube_http,
        validating(
            "v",
            "v.example.com",
            client_config(webhook_server, "/v"),
            namespaceSelector={"matchLabels": {"team": "gpu"}},
            objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        ),
    )
    for namespace, name, labels in (("gpu", "a", {}), ("gpu", "b", {"skip": "1"}), ("web", "c", {})):
        pod = make_pod(name, namespace=namespace, labels=labels)
        assert kube_http.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
    assert [r["name"] for r in webhook_server.requests("/v")] == ["a"]


def test_a_namespace_object_is_matched_by_its_own_labels(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    register(
        kube_http,
        validating(
            "v",
            "v.example.com",
            client_config(webhook_server, "/v"),
            [rule(["CREATE"], ["namespaces"])],
            namespaceSelector={"matchLabels": {"watched": "yes"}},
        ),
    )
    kube_http.post("/api/v1/namespaces", json={"metadata": {"name": "quiet"}})
    kube_http.post("/api/v1/namespaces", json={"metadata": {"name": "loud", "labels": {"watched": "yes"}}})
    (request,) = webhook_server.requests("/v")
    assert (request["name"], request["namespace"]) == ("loud", "loud")


def test_a_create_in_a_missing_namespace_is_404_before_any_webhook(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    register(kube_http, mutating("m", "m.example.com", client_config(webhook_server, "/m")))
    answer = kube_http.post("/api/v1/namespaces/nowhere/pods", json=make_pod("p", namespace="nowhere"))
    assert answer.status_code == 404
    assert answer.json()["message"] == 'namespaces "nowhere" not found'
    assert webhook_server.reviews == []


@pytest.mark.parametrize(("policy", "called"), [("Equivalent", True), ("Exact", False)])
def test_match_policy_decides_whether_an_equivalent_resource_matches(
    kube_http: httpx2.Client, webhook_server: WebhookServer, policy: str, called: bool
) -> None:
    """events.k8s.io/v1 Events are core/v1 Events under another name: a rule for core events matches
    them under Equivalent, and the webhook gets the object as a core/v1 Event."""
    hook_rule = rule(["CREATE"], ["events"])
    register(
        kube_http,
        validating("v", "v.example.com", client_config(webhook_server, "/v"), [hook_rule], matchPolicy=policy),
    )
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "hello",
        "reason": "Test",
        "type": "Normal",
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "tests",
        "reportingInstance": "tests-1",
        "action": "Testing",
    }
    answer = kube_http.post("/apis/events.k8s.io/v1/namespaces/default/events", json=event)
    assert answer.status_code == 201, answer.text
    requests = webhook_server.requests("/v")
    assert bool(requests) is called
    if called:
        (request,) = requests
        assert request["resource"] == {"group": "", "version": "v1", "resource": "events"}
        assert request["requestResource"] == {"group": "events.k8s.io", "version": "v1", "resource": "events"}
        assert request["object"]["apiVersion"] == "v1"
        assert request["object"]["message"] == "hello"


def test_a_service_client_config_reaches_the_services_endpoints(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    kube_http.post("/api/v1/namespaces", json={"metadata": {"name": "tests"}})
    service = {"metadata": {"name": "hooks"}, "spec": {"ports": [{"port": 443, "targetPort": webhook_server.port}]}}
    assert kube_http.post("/api/v1/namespaces/tests/services", json=service).status_code == 201
    target = {"service": {"namespace": "tests", "name": "hooks", "path": "/v"}, "caBundle": webhook_server.ca_bundle}
    register(kube_http, validating("v", "v.example.com", target))
    answer = create_pod(kube_http)
    assert answer.status_code == 500
    assert answer.json()["message"].endswith(
        'Post "https://hooks.tests.svc:443/v": no endpoints available for service "hooks"'
    )
    endpoints = {
        "metadata": {"name": "hooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": webhook_server.port}]}],
    }
    assert kube_http.post("/api/v1/namespaces/tests/endpoints", json=endpoints).status_code == 201
    assert create_pod(kube_http).status_code == 201  # the certificate names hooks.tests.svc
    assert webhook_server.paths() == ["/v"]


def test_webhook_configurations_are_never_sent_to_webhooks(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    webhook_server.answers["/v"] = deny("everything")
    everything = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}]
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v"), everything))
    assert kube_http.delete(f"{ADMISSION}/validatingwebhookconfigurations/v").status_code == 200
    assert create_pod(kube_http).status_code == 201


def test_the_server_keeps_answering_while_a_webhook_is_slow(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    import threading

    webhook_server.delays["/slow"] = 1.0
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/slow")))
    done: list[int] = []
    slow = threading.Thread(target=lambda: done.append(create_pod(kube_http).status_code))
    slow.start()
    time.sleep(0.2)
    started = time.monotonic()
    assert kube_http.get("/api/v1/namespaces/default").status_code == 200
    assert time.monotonic() - started < 0.5
    slow.join()
    assert done == [201]


def test_kubectl_prints_the_warnings_and_the_refusal(
    kubectl: Any, kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        labels = request["object"]["metadata"].get("labels") or {}
        if labels.get("deny"):
            return {"allowed": False, "status": {"code": 403, "message": "labelled deny"}, "warnings": ["looked at it"]}
        return {"warnings": ["looked at it"]}

    webhook_server.answers["/v"] = answer
    register(kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v")))
    created = kubectl("apply", "-f", "-", stdin=json.dumps(make_pod("fine")))
    assert "Warning: looked at it" in created.stderr
    refused = kubectl("apply", "-f", "-", stdin=json.dumps(make_pod("nope", labels={"deny": "1"})), check=False)
    assert refused.returncode != 0
    assert 'admission webhook "v.example.com" denied the request: labelled deny' in refused.stderr
    assert "Error from server (Forbidden)" in refused.stderr


def test_an_eviction_is_asked_of_the_webhooks_before_the_pod_goes(
    kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    assert create_pod(kube_http).status_code == 201
    webhook_server.answers["/e"] = deny("protected")
    register(
        kube_http,
        validating("e", "e.example.com", client_config(webhook_server, "/e"), [rule(["CREATE"], ["pods/eviction"])]),
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    answer = kube_http.post(f"{PODS}/p/eviction", json=eviction)
    assert answer.status_code == 403
    (request,) = webhook_server.requests("/e")
    assert (request["subResource"], request["kind"]["kind"]) == ("eviction", "Eviction")
    assert kube_http.get(f"{PODS}/p").status_code == 200


def test_an_update_racing_another_write_starts_again_from_the_stored_object(
    apiserver: ApiServer, kube_http: httpx2.Client, webhook_server: WebhookServer
) -> None:
    """While the webhook is asked about a patch, another write changes the pod: the patch is applied
    again to the new object (and the webhook asked again), as kube-apiserver's GuaranteedUpdate does."""
    assert create_pod(kube_http, labels={"a": "1"}).status_code == 201
    raced: list[bool] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if not raced:
            raced.append(True)
            other = httpx2.Client(base_url=apiserver.url, timeout=10.0, verify=False)
            patch_body = json.dumps({"metadata": {"labels": {"b": "2"}}})
            other.patch(f"{PODS}/p", content=patch_body, headers={"Content-Type": "application/merge-patch+json"})
            other.close()
        return {}

    webhook_server.answers["/v"] = answer
    register(
        kube_http, validating("v", "v.example.com", client_config(webhook_server, "/v"), [rule(["UPDATE"], ["pods"])])
    )
    body = json.dumps({"metadata": {"labels": {"c": "3"}}})
    answer_ = kube_http.patch(f"{PODS}/p", content=body, headers={"Content-Type": "application/merge-patch+json"})
    assert answer_.status_code == 200, answer_.text
    assert answer_.json()["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"}
    assert len(webhook_server.requests("/v")) == 3  # ours, the racing write's, ours again
