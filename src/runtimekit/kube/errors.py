"""The one vocabulary of API-server failures, free of any client library so every component can catch it.

Every failed call raises a `KubeError` subclass chosen by the HTTP status of the answer (`code`, 0
when there was none) and carrying the server's `Status` reason and message. `retryable` says
whether the same call may succeed later without anything else changing, as kopf's
`TemporaryError` and `PermanentError` do for a handler:

| class | status | retryable | what to do |
|---|---|---|---|
| `UnavailableError` | no answer (0), 408, 429, 5xx | yes | back off, try again |
| `ConflictError` | 409 (Conflict, AlreadyExists) | yes | read again, decide again |
| `ExpiredError` | 410 Gone | yes | list again (a watch's resourceVersion is too old) |
| `NotFoundError` | 404 | no | the object is gone: act on that |
| `InvalidError` | 400, 405, 406, 413, 415, 422 | no | the request itself is wrong; fix it |
| `ForbiddenError` | 401, 403 | no | credentials or RBAC; fix the deployment |
| `KubeError` | anything else | no | |

`runtimekit.kube.http.KubeHttp` raises these; fakes in tests raise them directly.
"""

from __future__ import annotations

from typing import ClassVar


class KubeError(Exception):
    """A call to the API server failed. `code` is the HTTP status (0: no answer), `reason` the
    `Status` reason (`NotFound`, `Conflict`, ...), `message` the server's words or ours."""

    retryable: ClassVar[bool] = False
    default_code: ClassVar[int] = 0

    def __init__(self, message: str, code: int | None = None, reason: str = "") -> None:
        self.code = self.default_code if code is None else code
        self.reason = reason
        self.message = message
        super().__init__(f"{self.code} {reason}: {message}" if reason else message)

    @staticmethod
    def of(code: int, reason: str, message: str) -> KubeError:
        """The error of an answer with HTTP status `code` (0: none came)."""
        return _class_of(code)(message, code, reason)

    def with_context(self, what: str) -> KubeError:
        """The same error, its message prefixed with what was being done."""
        return type(self)(f"{what}: {self.message}", self.code, self.reason)


class UnavailableError(KubeError):
    """The API server could not be reached, timed out, throttled the call or failed (5xx)."""

    retryable = True
    default_code = 503


class ConflictError(KubeError):
    """409: the object changed since it was read (a resourceVersion precondition failed), or exists."""

    retryable = True
    default_code = 409


class ExpiredError(KubeError):
    """410 Gone: the resourceVersion asked for is older than the server keeps; list again."""

    retryable = True
    default_code = 410


class NotFoundError(KubeError):
    """404: the object (or its kind) does not exist (any more)."""

    default_code = 404


class InvalidError(KubeError):
    """The server refused the request itself (400 BadRequest, 422 Invalid, ...): it will again."""

    default_code = 422


class ForbiddenError(KubeError):
    """401 or 403: the credentials are not accepted or may not do this."""

    default_code = 403


_BY_CODE: dict[int, type[KubeError]] = {
    0: UnavailableError,
    400: InvalidError,
    401: ForbiddenError,
    403: ForbiddenError,
    404: NotFoundError,
    405: InvalidError,
    406: InvalidError,
    408: UnavailableError,
    409: ConflictError,
    410: ExpiredError,
    413: InvalidError,
    415: InvalidError,
    422: InvalidError,
    429: UnavailableError,
}


def _class_of(code: int) -> type[KubeError]:
    return _BY_CODE.get(code) or (UnavailableError if code >= 500 else KubeError)
