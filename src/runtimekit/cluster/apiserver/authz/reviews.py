"""The review resources, answered and never stored, as kube-apiserver answers them:
authorization.k8s.io/v1 SelfSubjectAccessReview (`kubectl auth can-i`), SelfSubjectRulesReview
(`kubectl auth can-i --list`), SubjectAccessReview and LocalSubjectAccessReview (any user's access, for
those allowed to create them), authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`), and
a ServiceAccount's `token` subresource (TokenRequest, `kubectl create token`), whose token the server
then maps to `system:serviceaccount:<namespace>:<name>`.

`answer` takes the decoded body and returns the body with its `status` filled in. Called by
`handlers.Handlers` for a POST to one of `REVIEWS`.
"""

from __future__ import annotations

import datetime
from typing import Any, cast

from runtimekit.cluster.apiserver.authz.authorizer import Authorizer
from runtimekit.cluster.apiserver.authz.rules import Attributes
from runtimekit.cluster.apiserver.errors import bad_request, field_required, invalid
from runtimekit.cluster.apiserver.identity import Identities, UserInfo, service_account
from runtimekit.cluster.apiserver.resources import ResourceInfo
from runtimekit.kube.objects import JsonObject
from runtimekit.kube.objects.rbac import SubjectAccessReviewSpec, SubjectAccessReviewStatus, SubjectRulesReviewStatus

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
REVIEWS = frozenset(
    {
        (AUTHORIZATION, "selfsubjectaccessreviews"),
        (AUTHORIZATION, "selfsubjectrulesreviews"),
        (AUTHORIZATION, "subjectaccessreviews"),
        (AUTHORIZATION, "localsubjectaccessreviews"),
        (AUTHENTICATION, "selfsubjectreviews"),
    }
)
TOKEN_SECONDS = 3600  # kubectl create token's default --duration


def review_resources() -> tuple[ResourceInfo, ...]:
    """The review kinds for the resource table (create only, as discovery lists them)."""
    return (
        ResourceInfo(
            AUTHORIZATION, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=("create",)
        ),
        ResourceInfo(
            AUTHORIZATION, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False, verbs=("create",)
        ),
        ResourceInfo(AUTHORIZATION, "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)),
        ResourceInfo(
            AUTHORIZATION, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True, verbs=("create",)
        ),
        ResourceInfo(AUTHENTICATION, "v1", "selfsubjectreviews", "SelfSubjectReview", False, verbs=("create",)),
    )


def is_review(info: ResourceInfo) -> bool:
    return (info.group, info.plural) in REVIEWS


def answer(authorizer: Authorizer, who: UserInfo, info: ResourceInfo, namespace: str, body: Any) -> JsonObject:
    """The review `body` (a POSTed object) with its status, for the requesting user `who`."""
    if not isinstance(body, dict):
        raise bad_request(f"a {info.kind} must be a JSON object")
    out: JsonObject = {**body, "apiVersion": info.api_version, "kind": info.kind}
    out["metadata"] = {**(body.get("metadata") or {}), "creationTimestamp": None}
    spec = body.get("spec") or {}
    if info.plural == "selfsubjectreviews":
        out["status"] = {"userInfo": _user_info(who)}
    elif info.plural == "selfsubjectrulesreviews":
        out["status"] = _rules(authorizer, who, str(spec.get("namespace") or ""))
    else:
        out["status"] = _access(authorizer, who, info, namespace, cast(SubjectAccessReviewSpec, spec))
    return out


def _user_info(who: UserInfo) -> JsonObject:
    out: JsonObject = {"username": who.username, "groups": list(who.groups)}
    if who.uid:
        out["uid"] = who.uid
    return out


def _access(
    authorizer: Authorizer, who: UserInfo, info: ResourceInfo, namespace: str, spec: SubjectAccessReviewSpec
) -> SubjectAccessReviewStatus:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        cause = field_required(
            "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
        raise invalid(info.kind, "", [cause], info.group)
    if info.plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
        if not spec.get("user") and not spec.get("groups"):
            raise invalid(
                info.kind,
                "",
                [field_required("spec.user", "at least one of user or group must be specified")],
                info.group,
            )
        who = UserInfo(spec.get("user", ""), tuple(spec.get("groups") or ()), spec.get("uid", ""))
    if resource is not None:
        if info.plural == "localsubjectaccessreviews" and resource.get("namespace", "") != namespace:
            raise bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        asked = Attributes(
            resource.get("verb", ""),
            resource.get("group", ""),
            resource.get("resource", ""),
            resource.get("subresource", ""),
            resource.get("namespace", ""),
            resource.get("name", ""),
        )
    else:
        assert non_resource is not None
        asked = Attributes(non_resource.get("verb", ""), path=non_resource.get("path", "") or "/")
    return {"allowed": authorizer.allowed(who, asked)}


def _rules(authorizer: Authorizer, who: UserInfo, namespace: str) -> SubjectRulesReviewStatus:
    rules = authorizer.grants(who).rules_in(namespace)
    return {
        "resourceRules": [rule.resource_rule() for rule in rules if not rule.urls],
        "nonResourceRules": [rule.non_resource_rule() for rule in rules if rule.urls],
        "incomplete": False,
    }


def token_request(identities: Identities, namespace: str, name: str, body: Any, now: datetime.datetime) -> JsonObject:
    """A TokenRequest for ServiceAccount `namespace/name` (which the caller checked exists), answered."""
    spec = (body.get("spec") if isinstance(body, dict) else None) or {}
    seconds = int(spec.get("expirationSeconds") or TOKEN_SECONDS)
    if seconds < 600:
        cause = field_required("spec.expirationSeconds", "may not specify a duration less than 10 minutes")
        raise invalid("TokenRequest", name, [cause], AUTHENTICATION)
    expires = (now + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "kind": "TokenRequest",
        "apiVersion": f"{AUTHENTICATION}/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
        "spec": {**spec, "expirationSeconds": seconds},
        "status": {"token": identities.issue(service_account(namespace, name)), "expirationTimestamp": expires},
    }
