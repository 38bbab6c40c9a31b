"""Webhook configurations the API server refuses on write, with kube-apiserver's field messages, and the
defaults it stores (through HTTP, as kubectl would send them)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from fixtures.webhooks import validating

URL = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
GOOD = {"url": "https://127.0.0.1:8443/v"}


def config(**fields: Any) -> dict[str, Any]:
    made = validating("v", "v.example.com", GOOD)
    made["webhooks"][0].update(fields)
    return made


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"name": "short"},
            'webhooks[0].name: Invalid value: "short": should be a domain with at least three segments',
        ),
        ({"sideEffects": None}, "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"),
        (
            {"sideEffects": "Some"},
            'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
        ),
        (
            {"admissionReviewVersions": ["v2"]},
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ),
        ({"failurePolicy": "Sometimes"}, 'webhooks[0].failurePolicy: Unsupported value: "Sometimes"'),
        ({"matchPolicy": "Close"}, 'webhooks[0].matchPolicy: Unsupported value: "Close"'),
        (
            {"timeoutSeconds": 31},
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            {"clientConfig": {"url": "http://127.0.0.1/v"}},
            "webhooks[0].clientConfig.url: Invalid value: \"http://127.0.0.1/v\": 'https' is the only allowed URL "
            "scheme",
        ),
        ({"clientConfig": {"url": "https://h/v?x=1"}}, "fragments and query parameters are not permitted in the URL"),
        ({"clientConfig": {}}, "webhooks[0].clientConfig: Required value: exactly one of url or service is required"),
        (
            {"clientConfig": {"service": {"namespace": "ns", "name": "s", "path": "v"}}},
            "webhooks[0].clientConfig.service.path: Invalid value: \"v\": must start with a '/'",
        ),
        (
            {"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"]}]},
            "webhooks[0].rules[0].resources: Required value",
        ),
        (
            {"rules": [{"operations": ["MAKE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
            'webhooks[0].rules[0].operations[0]: Unsupported value: "MAKE"',
        ),
    ],
)
def test_bad_configurations_are_invalid(kube_http: httpx2.Client, fields: dict[str, Any], message: str) -> None:
    made = config(**fields)
    if fields.get("sideEffects", "") is None:
        del made["webhooks"][0]["sideEffects"]
    answer = kube_http.post(URL, json=made)
    assert answer.status_code == 422, answer.text
    assert message in answer.json()["message"]


def test_webhook_names_are_unique_in_a_configuration(kube_http: httpx2.Client) -> None:
    made = config()
    made["webhooks"].append(dict(made["webhooks"][0]))
    answer = kube_http.post(URL, json=made)
    assert answer.status_code == 422
    assert 'webhooks[1].name: Duplicate value: "v.example.com"' in answer.json()["message"]


def test_the_stored_configuration_carries_kube_apiservers_defaults(kube_http: httpx2.Client) -> None:
    made = config(clientConfig={"service": {"namespace": "ns", "name": "hooks"}})
    assert kube_http.post(URL, json=made).status_code == 201
    (hook,) = kube_http.get(f"{URL}/v").json()["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["namespaceSelector"] == {}
    assert hook["objectSelector"] == {}
    assert hook["timeoutSeconds"] == 10
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443
    assert "reinvocationPolicy" not in hook  # validating webhooks have none
