"""Who asks and whether they may: the authentication, impersonation and authorization steps of
kube-apiserver's handler chain, for the embedded server.

`Access.who(headers)` returns None for a request with neither credentials nor impersonation headers:
the cluster admin, whose requests skip every check (three header lookups are all they pay). Otherwise
the bearer token names the user (`identity.Identities`), and `Impersonate-User` / `Impersonate-Group`
(kubectl's `--as` / `--as-group`) replace it when that user may `impersonate` the `users`, `groups` or
`serviceaccounts` named, as kube's impersonation filter decides. `Access.check` then refuses the request
with kube's 403 wording (`pods is forbidden: User "jane" cannot list resource "pods" in API group "" in
the namespace "default"`) unless RBAC (`authorizer.Authorizer`) allows it. Called by `handlers.Handlers`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping

from multidict import MultiMapping

from runtimekit.cluster.apiserver.authz.authorizer import Authorizer
from runtimekit.cluster.apiserver.authz.rules import Attributes
from runtimekit.cluster.apiserver.errors import ApiError, bad_request
from runtimekit.cluster.apiserver.identity import ADMIN, AUTHENTICATED, Identities, UserInfo, service_account
from runtimekit.cluster.apiserver.routing import Target, parse_bool
from runtimekit.kube.objects import StatusDetails

log = logging.getLogger(__name__)
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "HEAD": "get"}
_SA_PREFIX = "system:serviceaccount:"
_UNAUTHENTICATED = "system:unauthenticated"


def forbidden(who: UserInfo, asked: Attributes) -> ApiError:
    """kube's 403 (apiserver/pkg/endpoints/handlers/responsewriters.ForbiddenStatusError)."""
    user = f'User "{who.username}"'
    if not asked.resource_request:
        return ApiError(403, "Forbidden", f'forbidden: {user} cannot {asked.verb} path "{asked.path}"', {})
    scope = f'in the namespace "{asked.namespace}"' if asked.namespace else "at the cluster scope"
    why = f'{user} cannot {asked.verb} resource "{asked.combined}" in API group "{asked.group}" {scope}'
    qualified = f"{asked.resource}.{asked.group}" if asked.group else asked.resource
    details: StatusDetails = {"name": asked.name} if asked.name else {}
    if asked.group:
        details["group"] = asked.group
    details["kind"] = asked.resource
    subject = f'{qualified} "{asked.name}"' if asked.name else qualified
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


def resource_attributes(method: str, target: Target, query: Mapping[str, str]) -> Attributes:
    """The verb and resource a request path asks for, as kube's RequestInfoFactory reads them: a GET of a
    collection is `list` (`watch` with `?watch=true`), a DELETE of one `deletecollection`, and a list or
    watch whose field selector pins `metadata.name` names that object."""
    name = target.name or ""
    verb = _VERBS.get(method, method.lower())
    if method == "GET" and (target.watch or (not target.name and parse_bool(query, "watch"))):
        verb = "watch"
    elif method == "GET" and not target.name:
        verb = "list"
    elif method == "DELETE" and not target.name:
        verb = "deletecollection"
    if verb in ("list", "watch") and not name:
        selector = query.get("fieldSelector", "")
        if selector.startswith("metadata.name=") and "," not in selector:
            name = selector.removeprefix("metadata.name=")
    return Attributes(verb, target.group, target.plural, target.subresource, target.namespace or "", name)


def user_of(name: str, groups: tuple[str, ...]) -> UserInfo:
    """The user an impersonation names: kube adds `system:authenticated` (and a ServiceAccount's groups)."""
    if name.startswith(_SA_PREFIX) and name.count(":") == 3:
        namespace, account = name.removeprefix(_SA_PREFIX).split(":")
        extra = service_account(namespace, account).groups
        return UserInfo(name, tuple(dict.fromkeys((*groups, *extra))))
    if name == "system:anonymous":
        return UserInfo(name, tuple(dict.fromkeys((*groups, _UNAUTHENTICATED))))
    return UserInfo(name, tuple(dict.fromkeys((*groups, AUTHENTICATED))))


class Access:
    """Authentication, impersonation and authorization of HTTP requests."""

    def __init__(self, identities: Identities, authorizer: Authorizer) -> None:
        self.identities, self.authorizer = identities, authorizer
        self.denied: deque[str] = deque(maxlen=256)  # the latest refusals' messages, for tests and debugging

    def who(self, headers: MultiMapping[str]) -> UserInfo | None:
        """The requesting user; None for the unrestricted admin (no credentials, no impersonation)."""
        authorization = headers.get("Authorization")
        as_user = headers.get("Impersonate-User")
        if not authorization and as_user is None and "Impersonate-Group" not in headers:
            return None
        who = self.identities.who(authorization) if authorization else ADMIN
        if as_user is None and "Impersonate-Group" not in headers:
            return who
        return self._impersonate(who, headers)

    def _impersonate(self, who: UserInfo, headers: MultiMapping[str]) -> UserInfo:
        as_user = headers.get("Impersonate-User", "")
        groups = tuple(headers.getall("Impersonate-Group", []))
        if not as_user:
            raise bad_request(f"requested {list(groups)} without impersonating a user")
        if as_user.startswith(_SA_PREFIX) and as_user.count(":") == 3:
            namespace, account = as_user.removeprefix(_SA_PREFIX).split(":")
            self._may(who, Attributes("impersonate", "", "serviceaccounts", namespace=namespace, name=account))
        else:
            self._may(who, Attributes("impersonate", "", "users", name=as_user))
        for group in groups:
            self._may(who, Attributes("impersonate", "", "groups", name=group))
        return user_of(as_user, groups)

    def _may(self, who: UserInfo, asked: Attributes) -> None:
        if not self.authorizer.allowed(who, asked):
            error = forbidden(who, asked)
            self.denied.append(error.message)
            log.info("%s", error.message)
            raise error

    def check_resource(self, who: UserInfo, method: str, target: Target, query: Mapping[str, str]) -> None:
        self._may(who, resource_attributes(method, target, query))

    def check_path(self, who: UserInfo, method: str, path: str) -> None:
        self._may(who, Attributes(_VERBS.get(method, method.lower()), path=path))

    def allowed(self, who: UserInfo, asked: Attributes) -> bool:
        return self.authorizer.allowed(who, asked)
