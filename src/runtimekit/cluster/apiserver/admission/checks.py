"""Validation of webhook configurations as kube-apiserver does it on create and update
(`admissionregistration/validation`), with its messages: each webhook needs a fully qualified, unique
name, `admissionReviewVersions` naming v1 or v1beta1, `sideEffects` None or NoneOnDryRun, exactly one
of `clientConfig.url` (https, no user, query or fragment) and `clientConfig.service` (a path starting
with `/`, a port 1-65535), rules with operations and resources, known policies, and valid label
selectors; timeouts are 1-30 seconds. `check_configuration` returns the causes (empty when valid);
`operations.Api.validate` turns them into 422 Invalid. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast
from urllib.parse import urlsplit

from runtimekit.cluster.apiserver.admission.attributes import OPERATIONS
from runtimekit.cluster.apiserver.errors import Cause, field_invalid, field_required, field_unsupported
from runtimekit.cluster.apiserver.resources import NameRule
from runtimekit.cluster.apiserver.validation import SUBDOMAIN_MSG, name_problems
from runtimekit.kube.objects import JsonObject, MutatingWebhook, RuleWithOperations, WebhookClientConfig
from runtimekit.kube.semantics.labels import SelectorProblem, selector_problems

_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_REVIEW_VERSIONS = ("v1", "v1beta1")
_SCOPES = ("*", "Cluster", "Namespaced")


def _choice(path: str, value: object, allowed: Sequence[str]) -> list[Cause]:
    return [] if value is None or value in allowed else [field_unsupported(path, value, list(allowed))]


def _name(path: str, name: object, seen: set[str]) -> list[Cause]:
    if not name:
        return [field_required(path)]
    text = str(name)
    if name_problems(text, NameRule.SUBDOMAIN):
        return [field_invalid(path, text, SUBDOMAIN_MSG)]
    if text.count(".") < 2:
        return [field_invalid(path, text, "should be a domain with at least three segments separated by dots")]
    if text in seen:
        return [Cause("FieldValueDuplicate", f'Duplicate value: "{text}"', path)]
    seen.add(text)
    return []


def _client(path: str, config: WebhookClientConfig) -> list[Cause]:
    url, service = config.get("url"), config.get("service")
    if bool(url) == bool(service):
        return [field_required(path, "exactly one of url or service is required")]
    if url:
        parts = urlsplit(url)
        if parts.scheme != "https":
            return [field_invalid(f"{path}.url", url, "'https' is the only allowed URL scheme")]
        if not parts.hostname:
            return [field_invalid(f"{path}.url", url, "host must be specified")]
        if parts.username or parts.password:
            return [field_invalid(f"{path}.url", url, "user information is not permitted in the URL")]
        if parts.fragment or parts.query:
            return [field_invalid(f"{path}.url", url, "fragments and query parameters are not permitted in the URL")]
        return []
    assert service is not None
    causes = [field_required(f"{path}.service.{key}") for key in ("name", "namespace") if not service.get(key)]
    service_path = service.get("path")
    if service_path and not service_path.startswith("/"):
        causes.append(field_invalid(f"{path}.service.path", service_path, "must start with a '/'"))
    port = service.get("port")
    if port is not None and not 1 <= int(port) <= 65535:
        causes.append(field_invalid(f"{path}.service.port", port, "port is not valid: must be between 1 and 65535"))
    return causes


def _cause(problem: SelectorProblem) -> Cause:
    if problem.kind == "Required":
        return field_required(problem.path, problem.detail)
    if problem.kind == "Forbidden":
        return Cause("FieldValueForbidden", f"Forbidden: {problem.detail}", problem.path)
    return field_invalid(problem.path, problem.value, problem.detail)


def _rule(path: str, rule: RuleWithOperations) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("operations", "apiGroups", "apiVersions", "resources"):
        if not rule.get(key):
            causes.append(field_required(f"{path}.{key}"))
    for index, operation in enumerate(rule.get("operations") or ()):
        causes += _choice(f"{path}.operations[{index}]", operation, (*OPERATIONS, "*"))
    return causes + _choice(f"{path}.scope", rule.get("scope"), _SCOPES)


def _webhook(path: str, hook: MutatingWebhook, mutating: bool, seen: set[str]) -> list[Cause]:
    causes = _name(f"{path}.name", hook.get("name"), seen)
    versions = hook.get("admissionReviewVersions") or []
    if not any(v in _REVIEW_VERSIONS for v in versions):
        causes.append(field_required(f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(field_required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
    causes += _choice(f"{path}.sideEffects", side_effects, _SIDE_EFFECTS)
    causes += _choice(f"{path}.failurePolicy", hook.get("failurePolicy"), ("Fail", "Ignore"))
    causes += _choice(f"{path}.matchPolicy", hook.get("matchPolicy"), ("Equivalent", "Exact"))
    if mutating:
        causes += _choice(f"{path}.reinvocationPolicy", hook.get("reinvocationPolicy"), ("IfNeeded", "Never"))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and not 1 <= int(timeout) <= 30:
        why = "the timeout value must be between 1 and 30 seconds"
        causes.append(field_invalid(f"{path}.timeoutSeconds", timeout, why))
    causes += _client(f"{path}.clientConfig", hook.get("clientConfig") or {})
    for key in ("namespaceSelector", "objectSelector"):
        causes += [_cause(p) for p in selector_problems(hook.get(key), f"{path}.{key}")]
    for index, rule in enumerate(hook.get("rules") or ()):
        causes += _rule(f"{path}.rules[{index}]", rule)
    return causes


def check_configuration(kind: str, obj: JsonObject) -> list[Cause]:
    """The problems of a MutatingWebhookConfiguration or ValidatingWebhookConfiguration."""
    mutating = kind == "MutatingWebhookConfiguration"
    seen: set[str] = set()
    hooks = cast(list[MutatingWebhook], obj.get("webhooks") or [])
    return [cause for index, hook in enumerate(hooks) for cause in _webhook(f"webhooks[{index}]", hook, mutating, seen)]
