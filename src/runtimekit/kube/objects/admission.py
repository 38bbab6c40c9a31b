"""Admission, typed once: the webhook configurations of `admissionregistration.k8s.io/v1`
(`MutatingWebhookConfiguration`, `ValidatingWebhookConfiguration`, their webhooks, rules and client
configs) and the `admission.k8s.io/v1` `AdmissionReview` an API server sends a webhook and reads back.

The embedded API server reads the configurations and writes the requests; the kit's webhook reads
the requests and writes the responses. Field names and meanings are Kubernetes' own.
"""

from __future__ import annotations

from typing import TypedDict

from runtimekit.kube.objects.meta import JsonObject, LabelSelector, ObjectMeta, Status


class RuleWithOperations(TypedDict, total=False):
    """Which requests a webhook is called for: any listed operation on any listed resource
    (`pods`, `pods/binding`, `*/status`, `*`) of any listed group and version, in `scope`."""

    operations: list[str]  # CREATE, UPDATE, DELETE, CONNECT, *
    apiGroups: list[str]
    apiVersions: list[str]
    resources: list[str]
    scope: str  # Cluster, Namespaced, * (the default)


class ServiceReference(TypedDict, total=False):
    namespace: str
    name: str
    path: str
    port: int  # 443 by default


class WebhookClientConfig(TypedDict, total=False):
    """Where the webhook listens: `url` (https only) or a Service; `caBundle` (base64 PEM) verifies it."""

    url: str
    service: ServiceReference
    caBundle: str


class MatchCondition(TypedDict, total=False):
    name: str
    expression: str  # CEL


class ValidatingWebhook(TypedDict, total=False):
    name: str
    clientConfig: WebhookClientConfig
    rules: list[RuleWithOperations]
    failurePolicy: str  # Fail (the default) or Ignore
    matchPolicy: str  # Equivalent (the default) or Exact
    namespaceSelector: LabelSelector
    objectSelector: LabelSelector
    sideEffects: str  # None, NoneOnDryRun (v1 allows only these two), Some, Unknown
    timeoutSeconds: int  # 1-30, 10 by default
    admissionReviewVersions: list[str]
    matchConditions: list[MatchCondition]


class MutatingWebhook(ValidatingWebhook, total=False):
    reinvocationPolicy: str  # Never (the default) or IfNeeded


class ValidatingWebhookConfiguration(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    webhooks: list[ValidatingWebhook]


class MutatingWebhookConfiguration(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    webhooks: list[MutatingWebhook]


class GroupVersionKind(TypedDict, total=False):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict, total=False):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    """`authentication.k8s.io/v1` UserInfo: who made the request."""

    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict, total=False):
    """What an API server asks a webhook: the request's resource (and kind) as the webhook's rules
    matched it, and as the client made it (`request*`), who asks, the object and the old object
    (null where the operation has none) and the operation's options."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    requestKind: GroupVersionKind
    requestResource: GroupVersionResource
    requestSubResource: str
    name: str
    namespace: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    userInfo: UserInfo
    object: JsonObject | None
    oldObject: JsonObject | None
    dryRun: bool
    options: JsonObject | None


class AdmissionResponse(TypedDict, total=False):
    """A webhook's answer: `uid` of the request, allowed or not (`status` says why not), an RFC 6902
    JSONPatch (base64, `patchType: JSONPatch`) from a mutating webhook, and warnings for the client."""

    uid: str
    allowed: bool
    status: Status
    patch: str
    patchType: str
    auditAnnotations: dict[str, str]
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    apiVersion: str  # admission.k8s.io/v1
    kind: str  # AdmissionReview
    request: AdmissionRequest
    response: AdmissionResponse
