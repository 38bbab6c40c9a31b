"""Who makes a request: the bearer tokens the embedded API server hands out, and the user each names.

The server authorises nothing (docs/security.md: it is for development); a token only tells it who
asks, so that admission webhooks get the `userInfo` kube-apiserver would send. `Identities.issue`
gives a user a token (the same one every time it is asked for that user); `who` maps a request's
`Authorization` header back to the user. A request with no credentials at all is the cluster's admin:
it may do anything here, and kubectl sends none to a plain-http server (client-go reads a kubeconfig's
credentials only for TLS servers), so the admin kubeconfig's requests arrive so. A bearer token the
server did not issue is `system:anonymous`. The usernames follow
Kubernetes: `kubernetes-admin` in `system:masters` for the admin kubeconfig, a ServiceAccount's
`system:serviceaccount:<namespace>:<name>`, a node's `system:node:<name>`.
Called by `server.ApiServer` (which writes kubeconfigs with these tokens) and by the admission glue.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""


ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))
ADMIN = UserInfo("kubernetes-admin", ("system:masters", AUTHENTICATED))


def service_account(namespace: str, name: str) -> UserInfo:
    """A ServiceAccount's user, as its token authenticates."""
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return UserInfo(f"system:serviceaccount:{namespace}:{name}", groups)


def node(name: str) -> UserInfo:
    """A kubelet's user (its client certificate's, on a real node)."""
    return UserInfo(f"system:node:{name}", ("system:nodes", AUTHENTICATED))


def user(username: str, *groups: str) -> UserInfo:
    """Any other user (a controller manager, a test's client)."""
    return UserInfo(username, (*groups, AUTHENTICATED))


class Identities:
    """Tokens to users; thread-safe. Tokens are random and live as long as the server object."""

    def __init__(self) -> None:
        self._users: dict[str, UserInfo] = {}  # token -> user
        self._tokens: dict[str, str] = {}  # username -> token
        self._lock = threading.Lock()

    def issue(self, who: UserInfo) -> str:
        """The token that authenticates `who` (made on the first call for the username)."""
        with self._lock:
            token = self._tokens.get(who.username)
            if token is None:
                token = self._tokens[who.username] = secrets.token_urlsafe(24)
            self._users[token] = who
            return token

    def who(self, authorization: str | None) -> UserInfo:
        """The user of an `Authorization: Bearer <token>` header: the admin without credentials,
        anonymous with a token the server did not issue."""
        if not authorization:
            return ADMIN
        if not authorization.startswith("Bearer "):
            return ANONYMOUS
        return self._users.get(authorization[7:].strip(), ANONYMOUS)
