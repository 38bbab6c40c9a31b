"""Webhook configurations compiled into the values the dispatchers use.

`compile_webhooks` takes the stored `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`
objects and returns their webhooks in kube-apiserver's calling order: configurations by name, then
each configuration's webhooks as listed. Defaults are kube-apiserver's: failurePolicy Fail,
matchPolicy Equivalent, empty selectors (everything), timeoutSeconds 10, reinvocationPolicy Never,
rule scope `*`, and a service port of 443. Pure.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from runtimekit.cluster.apiserver.admission.rules import Rule
from runtimekit.kube.objects import (
    LabelSelector,
    MutatingWebhook,
    MutatingWebhookConfiguration,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
    WebhookClientConfig,
    meta,
)
from runtimekit.kube.semantics.labels import EVERYTHING, Selector, label_selector_or_nothing

FAIL, IGNORE = "Fail", "Ignore"
EXACT, EQUIVALENT = "Exact", "Equivalent"
DEFAULT_TIMEOUT_S = 10


@dataclass(frozen=True)
class ServiceTarget:
    namespace: str
    name: str
    path: str = ""
    port: int = 443


@dataclass(frozen=True)
class ClientConfig:
    """Where to send reviews: a URL, or a Service of the cluster; the CA bundle (PEM) verifies it."""

    url: str = ""
    service: ServiceTarget | None = None
    ca_bundle: bytes = b""


@dataclass(frozen=True)
class Webhook:
    uid: str  # the configuration's name and the webhook's index: what a reinvocation round tracks
    name: str
    configuration: str
    mutating: bool
    rules: tuple[Rule, ...]
    client: ClientConfig
    failure_policy: str = FAIL
    match_policy: str = EQUIVALENT
    namespace_selector: Selector = EVERYTHING  # as parsed: a selector that does not parse selects nothing
    object_selector: Selector = EVERYTHING
    side_effects: str = ""
    timeout_s: int = DEFAULT_TIMEOUT_S
    reinvoke: bool = False  # reinvocationPolicy IfNeeded
    review_versions: tuple[str, ...] = ("v1",)

    @property
    def ignores_failures(self) -> bool:
        return self.failure_policy == IGNORE


@dataclass(frozen=True)
class WebhookSet:
    mutating: tuple[Webhook, ...] = ()
    validating: tuple[Webhook, ...] = ()


def _ca_bundle(text: object) -> bytes:
    if not isinstance(text, str) or not text:
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""  # validation refuses such a bundle on write; a stored one verifies nothing


def _selector(raw: LabelSelector | None) -> Selector:
    """A webhook's selector; missing or empty selects everything (validation refuses bad ones on write)."""
    return label_selector_or_nothing(raw if raw is not None else {})


def _client(raw: WebhookClientConfig) -> ClientConfig:
    service = raw.get("service")
    target = None
    if service:
        target = ServiceTarget(
            service.get("namespace", ""), service.get("name", ""), service.get("path", ""), service.get("port") or 443
        )
    return ClientConfig(raw.get("url", ""), target, _ca_bundle(raw.get("caBundle")))


def _webhook(configuration: str, index: int, raw: ValidatingWebhook, mutating: bool) -> Webhook:
    return Webhook(
        uid=f"{configuration}/{index}",
        name=raw.get("name", ""),
        configuration=configuration,
        mutating=mutating,
        rules=tuple(Rule.of(rule) for rule in raw.get("rules") or ()),
        client=_client(raw.get("clientConfig") or {}),
        failure_policy=raw.get("failurePolicy") or FAIL,
        match_policy=raw.get("matchPolicy") or EQUIVALENT,
        namespace_selector=_selector(raw.get("namespaceSelector")),
        object_selector=_selector(raw.get("objectSelector")),
        side_effects=raw.get("sideEffects") or "",
        timeout_s=int(raw.get("timeoutSeconds") or DEFAULT_TIMEOUT_S),
        reinvoke=mutating and cast(MutatingWebhook, raw).get("reinvocationPolicy") == "IfNeeded",
        review_versions=tuple(raw.get("admissionReviewVersions") or ("v1",)),
    )


def _in_order(
    configurations: Iterable[MutatingWebhookConfiguration | ValidatingWebhookConfiguration], mutating: bool
) -> tuple[Webhook, ...]:
    ordered = sorted(configurations, key=lambda c: meta(c).get("name", ""))
    return tuple(
        _webhook(meta(config).get("name", ""), index, raw, mutating)
        for config in ordered
        for index, raw in enumerate(config.get("webhooks") or ())
    )


def compile_webhooks(
    mutating: Iterable[MutatingWebhookConfiguration], validating: Iterable[ValidatingWebhookConfiguration]
) -> WebhookSet:
    return WebhookSet(_in_order(mutating, True), _in_order(validating, False))
