"""Calling the webhooks that match a request, as kube-apiserver's mutating and validating
dispatchers do (`webhook/mutating/dispatcher.go`, `webhook/validating/dispatcher.go`).

Mutating webhooks run one after another in the set's order; each gets the object as the previous ones
left it and may answer with a JSONPatch, which is applied. When one changes the object, the webhooks
with reinvocationPolicy IfNeeded that ran before it run once more, in a second round. Validating
webhooks see the final object, all at once (in parallel); the first refusal, in the set's order, wins.

Outcomes, in kube-apiserver's words: a refusal is `admission webhook "NAME" denied the request: MESSAGE`
(the webhook's status code, 403 when it gives none); a webhook that cannot be called, times out or
answers badly is skipped under failurePolicy Ignore and is a 500 `Internal error occurred: failed
calling webhook "NAME": …` under Fail; a dry-run request to a webhook whose sideEffects are not None or
NoneOnDryRun is a 400 `admission webhook "NAME" does not support dry run`; a patch that does not apply
is a 500. Warnings of every webhook called go to the client (`Warning: 299` headers).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from runtimekit.cluster.apiserver.admission.attributes import Attributes, Kind, Resource
from runtimekit.cluster.apiserver.admission.client import CallFailed, Endpoint, WebhookClient
from runtimekit.cluster.apiserver.admission.review import (
    JSON_PATCH,
    InvalidResponse,
    Verdict,
    review_request,
    review_version,
    verify_response,
)
from runtimekit.cluster.apiserver.admission.selectors import NamespaceLabels, namespace_matches, object_matches
from runtimekit.cluster.apiserver.admission.webhooks import EQUIVALENT, ClientConfig, Webhook
from runtimekit.cluster.apiserver.errors import ApiError, bad_request, internal
from runtimekit.cluster.apiserver.patch import PatchApplyError, PatchFormatError, json_patch
from runtimekit.cluster.apiserver.typed import warn
from runtimekit.kube import jsoncodec
from runtimekit.kube.objects import JsonObject, Status

log = logging.getLogger(__name__)
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="admission")
NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")

View = Callable[[JsonObject], JsonObject]


@dataclass(frozen=True)
class Equivalent:
    """The request's resource under another group or version (the same stored objects): a rule that
    names it matches under matchPolicy Equivalent, and the webhook gets the object in that form."""

    resource: Resource
    kind: Kind
    to_view: View  # from the request's form
    from_view: View  # back to the request's form


@dataclass(frozen=True)
class Invocation:
    webhook: Webhook
    resource: Resource
    kind: Kind
    view: Equivalent | None = None


class CallError(Exception):
    """A webhook that could not be called or answered badly: its failure policy decides."""


Resolve = Callable[[ClientConfig], tuple[Endpoint, str]]
"""Where a client config points: the endpoint to connect to and the URL to name in messages."""


@dataclass
class Dispatcher:
    client: WebhookClient
    resolve: Resolve
    namespace_labels: NamespaceLabels

    # -- which webhooks -------------------------------------------------------------------------
    def invocation(self, hook: Webhook, at: Attributes, equivalents: Sequence[Equivalent]) -> Invocation | None:
        """The webhook's invocation for the request, None when its rules or selectors leave it out.
        Raises ApiError when a selector cannot be evaluated (the namespace does not exist)."""
        found = self._by_rules(hook, at, equivalents)
        if found is None:
            return None
        if not namespace_matches(hook.namespace_selector, at, self.namespace_labels):
            return None
        return found if object_matches(hook.object_selector, at) else None

    @staticmethod
    def _by_rules(hook: Webhook, at: Attributes, equivalents: Sequence[Equivalent]) -> Invocation | None:
        if any(rule.matches(at.operation, at.resource, at.subresource, at.namespace) for rule in hook.rules):
            return Invocation(hook, at.resource, at.kind)
        if hook.match_policy != EQUIVALENT:
            return None
        for rule in hook.rules:  # earlier rules first, as kube-apiserver honours them
            for other in equivalents:
                if rule.matches(at.operation, other.resource, at.subresource, at.namespace):
                    return Invocation(hook, other.resource, other.kind, other)
        return None

    # -- mutating -------------------------------------------------------------------------------
    def mutate(self, hooks: Sequence[Webhook], at: Attributes, equivalents: Sequence[Equivalent]) -> JsonObject | None:
        """The object after every matching mutating webhook (and the IfNeeded ones again after a change)."""
        obj = at.obj
        invoked: set[str] = set()  # IfNeeded webhooks called since the last change
        again: set[str] = set()
        for hook in hooks:
            invocation = self.invocation(hook, at.with_object(obj), equivalents)
            if invocation is None:
                continue
            changed, obj = self._mutate_one(invocation, at.with_object(obj))
            if changed:
                again |= invoked
                invoked = set()
            if hook.reinvoke:
                invoked.add(hook.uid)
        for hook in hooks if again else ():
            if hook.uid not in again:
                continue
            invocation = self.invocation(hook, at.with_object(obj), equivalents)
            if invocation is not None:
                _, obj = self._mutate_one(invocation, at.with_object(obj))
        return obj

    def _mutate_one(self, invocation: Invocation, at: Attributes) -> tuple[bool, JsonObject | None]:
        hook = invocation.webhook
        try:
            verdict = self._call(invocation, at)
            if not verdict.allowed:
                raise denied(hook.name, verdict.status)
            if not verdict.patch:
                return False, at.obj
            if verdict.patch_type != JSON_PATCH:
                raise CallError(f'unsupported patch type "{verdict.patch_type}"')
            try:
                operations = jsoncodec.loads(verdict.patch)
            except ValueError as exc:
                raise CallError(f"received undecodable patch in webhook response: {exc}") from None
        except CallError as exc:
            return self._failed(hook, exc), at.obj
        if not operations:
            return False, at.obj
        if at.obj is None:
            why = "attempted to modify the object, which is not supported for this operation"
            raise internal(f'admission webhook "{hook.name}" {why}')
        return _patched(invocation, at.obj, operations)

    # -- validating -----------------------------------------------------------------------------
    def validate(self, hooks: Sequence[Webhook], at: Attributes, equivalents: Sequence[Equivalent]) -> None:
        invocations = [i for hook in hooks if (i := self.invocation(hook, at, equivalents)) is not None]
        if len(invocations) == 1:
            self._validate_one(invocations[0], at)
            return
        # each call in a copy of this context, so that its warnings reach this request's collector
        futures = [
            _POOL.submit(contextvars.copy_context().run, self._validate_one, invocation, at)
            for invocation in invocations
        ]
        errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error

    def _validate_one(self, invocation: Invocation, at: Attributes) -> None:
        try:
            verdict = self._call(invocation, at)
        except CallError as exc:
            self._failed(invocation.webhook, exc)
            return
        if not verdict.allowed:
            raise denied(invocation.webhook.name, verdict.status)

    # -- one call -------------------------------------------------------------------------------
    def _call(self, invocation: Invocation, at: Attributes) -> Verdict:
        """The webhook's verdict; CallError when it cannot be had; ApiError for a refused dry run."""
        hook = invocation.webhook
        if at.dry_run and hook.side_effects not in NO_SIDE_EFFECTS:
            if not hook.side_effects:
                raise CallError("Webhook SideEffects is nil")
            raise bad_request(f'admission webhook "{hook.name}" does not support dry run')
        try:
            version = review_version(hook.review_versions)
        except InvalidResponse as exc:
            raise CallError(f"could not create admission objects: {exc}") from None
        try:
            endpoint, shown = self.resolve(hook.client)
        except CallFailed as exc:
            raise CallError(f"failed to call webhook: {exc}") from None
        uid = str(uuid.uuid4())
        view = invocation.view
        sent = at if view is None else _viewed(at, view)
        body = jsoncodec.dumps(review_request(uid, version, sent, invocation.resource, invocation.kind))
        try:
            answer = self.client.post(endpoint, hook.client.ca_bundle, body, hook.timeout_s, shown)
        except CallFailed as exc:
            raise CallError(f"failed to call webhook: {exc}") from None
        try:
            verdict = verify_response(uid, version, hook.mutating, _decoded(answer))
        except InvalidResponse as exc:
            raise CallError(f"received invalid webhook response: {exc}") from None
        for text in verdict.warnings:
            warn(text)
        return verdict

    @staticmethod
    def _failed(hook: Webhook, exc: CallError) -> bool:
        """Under Ignore, log and go on (False: nothing changed); under Fail, refuse the request."""
        message = f'failed calling webhook "{hook.name}": {exc}'
        if hook.ignores_failures:
            log.warning("Failed calling webhook, failing open %s: %s", hook.name, message)
            return False
        log.warning("Failed calling webhook, failing closed %s: %s", hook.name, message)
        raise internal(message)


def denied(name: str, status: Status | None) -> ApiError:
    """kube-apiserver's refusal for a webhook's `allowed: false`."""
    given = cast(Status, dict(status or {}))
    prefix = f'admission webhook "{name}" denied the request'
    if given.get("message"):
        message = f"{prefix}: {given['message']}"
    elif given.get("reason"):
        message = f"{prefix}: {given['reason']}"
    else:
        message = f"{prefix} without explanation"
    code = int(given.get("code") or 0)
    code = code if code >= 400 else 403
    reason = given.get("reason") or ("Forbidden" if code == 403 else "")
    return ApiError(code, reason, message, given.get("details") or {})


def _decoded(answer: bytes) -> Any:
    try:
        return jsoncodec.loads(answer)
    except ValueError as exc:
        raise InvalidResponse(f"the answer is not JSON: {exc}") from None


def _viewed(at: Attributes, view: Equivalent) -> Attributes:
    obj = None if at.obj is None else view.to_view(jsoncodec.loads(jsoncodec.dumps(at.obj)))
    old = None if at.old is None else view.to_view(jsoncodec.loads(jsoncodec.dumps(at.old)))
    return dataclasses.replace(at, obj=obj, old=old)


def _patched(invocation: Invocation, obj: JsonObject, operations: Any) -> tuple[bool, JsonObject]:
    view = invocation.view
    target = obj if view is None else view.to_view(jsoncodec.loads(jsoncodec.dumps(obj)))
    try:
        patched = json_patch(target, operations)
    except (PatchFormatError, PatchApplyError) as exc:
        raise internal(str(exc)) from None
    if not isinstance(patched, dict):
        raise internal(f'admission webhook "{invocation.webhook.name}" patched the object into a non-object')
    result: JsonObject = patched if view is None else view.from_view(patched)
    return result != obj, result
