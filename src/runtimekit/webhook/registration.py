"""The kit's webhook configurations: which requests the API server sends the webhook, and how it fails.

One `MutatingWebhookConfiguration` and one `ValidatingWebhookConfiguration`, both named
`lj-runtimekit-webhook` (deploy/webhook/ holds the same objects; a test keeps them equal):

- `mutate.runtimekit.aliyun.com`: pods CREATE, failurePolicy Ignore, 5 s. A convenience (the
  scheduler's name, HAMi's GPU count): while the webhook is down pods are still created, and one that
  missed it is placed by the scheduler it names or stays Pending with the scheduler's reason. Fail
  would stop every pod of the cluster, GPU or not.
- `validate.runtimekit.aliyun.com`: pods CREATE, UPDATE, failurePolicy Fail, 5 s. It keeps forged
  assignments and impossible requests out of the API; the kit's namespaces are left out, so the
  webhook's own pods start without it.
- `bindings.runtimekit.aliyun.com`: pods/binding CREATE, failurePolicy Ignore, 5 s. Only schedulers
  bind; Fail would stop all scheduling while the webhook is down, and the device plugin still
  refuses an assignment the scheduler did not sign.

All: sideEffects None (dry runs are answered), admissionReviewVersions v1, matchPolicy Equivalent, the
mutating one reinvocationPolicy IfNeeded (another webhook adding a GPU container gets it defaulted
too), and a namespaceSelector leaving out `kube-system` and the controller's Job namespace. Under
HAMi's names the mutating webhook also skips pods and namespaces labelled `hami.io/webhook: ignore`,
as HAMi's chart configures it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtimekit.kube.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ServiceReference,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
    WebhookClientConfig,
)
from runtimekit.webhook.settings import HAMI_OPT_OUT

NAME = "lj-runtimekit-webhook"
MUTATE, VALIDATE, BINDINGS = (
    "mutate.runtimekit.aliyun.com",
    "validate.runtimekit.aliyun.com",
    "bindings.runtimekit.aliyun.com",
)
TIMEOUT_S = 5
EXCLUDED_NAMESPACES = ("kube-system", "lj-runtimekit-jobs")


@dataclass(frozen=True)
class Client:
    """How the API server reaches the webhook: `url` (`https://host:port`), or a Service."""

    ca_bundle: str  # base64 PEM
    url: str = ""
    service_namespace: str = ""
    service_name: str = ""
    service_port: int = 443

    def config(self, path: str) -> WebhookClientConfig:
        if self.url:
            return {"url": self.url + path, "caBundle": self.ca_bundle}
        service: ServiceReference = {
            "namespace": self.service_namespace,
            "name": self.service_name,
            "path": path,
            "port": self.service_port,
        }
        return {"service": service, "caBundle": self.ca_bundle}


def _rule(operations: list[str], resource: str) -> RuleWithOperations:
    return {
        "operations": operations,
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": [resource],
        "scope": "Namespaced",
    }


def _namespaces(excluded: Sequence[str], hami: bool) -> LabelSelector:
    expressions: list[LabelSelectorRequirement] = [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded)}
    ]
    if hami:
        expressions.append({"key": HAMI_OPT_OUT[0], "operator": "NotIn", "values": [HAMI_OPT_OUT[1]]})
    return {"matchExpressions": expressions}


def _validating(
    name: str, client: WebhookClientConfig, rule: RuleWithOperations, policy: str, selector: LabelSelector
) -> ValidatingWebhook:
    return {
        "name": name,
        "clientConfig": client,
        "rules": [rule],
        "failurePolicy": policy,
        "matchPolicy": "Equivalent",
        "namespaceSelector": selector,
        "objectSelector": {},
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_S,
        "admissionReviewVersions": ["v1"],
    }


def configurations(
    client: Client, *, excluded: Sequence[str] = EXCLUDED_NAMESPACES, hami: bool = False
) -> tuple[MutatingWebhookConfiguration, ValidatingWebhookConfiguration]:
    selector = _namespaces(excluded, False)
    mutate: MutatingWebhook = {
        **_validating(
            MUTATE, client.config("/mutate"), _rule(["CREATE"], "pods"), "Ignore", _namespaces(excluded, hami)
        ),
        "reinvocationPolicy": "IfNeeded",
    }
    if hami:
        key, value = HAMI_OPT_OUT
        mutate["objectSelector"] = {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]}
    labels = {"app.kubernetes.io/name": "lj-runtimekit", "app.kubernetes.io/component": "webhook"}
    return (
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": NAME, "labels": labels},
            "webhooks": [mutate],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": NAME, "labels": labels},
            "webhooks": [
                _validating(
                    VALIDATE, client.config("/validate"), _rule(["CREATE", "UPDATE"], "pods"), "Fail", selector
                ),
                _validating(
                    BINDINGS, client.config("/validate"), _rule(["CREATE"], "pods/binding"), "Ignore", selector
                ),
            ],
        },
    )
