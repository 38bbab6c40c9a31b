"""`Status` errors as a real kube-apiserver writes them, so clients print the same messages.

Every failure inside the server is an `ApiError` carrying the HTTP code, the `reason` kubectl prints
(`Error from server (NotFound): pods "x" not found`) and optional details. The builders below mirror
`k8s.io/apimachinery/pkg/api/errors` (NewNotFound, NewAlreadyExists, NewConflict, NewInvalid, ...).
Callers: every module of the server that rejects a request; `server.py` turns them into responses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from runtimekit.kube.objects import Status, StatusDetails


@dataclass(frozen=True)
class Cause:
    """One field error of an `Invalid` status (`details.causes[]`)."""

    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueForbidden, FieldValueNotSupported...
    message: str
    field: str

    def render(self) -> str:
        """The text the real server puts in the top-level message: `field: message`."""
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class ApiError(Exception):
    """A request the server refuses; `status()` is the body of the response."""

    code: int
    reason: str
    message: str
    details: StatusDetails = field(default_factory=StatusDetails)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> Status:
        body: Status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # a storage error passed through (etcd's "request is too large") has none
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


def success_status(code: int = 200, details: StatusDetails | None = None) -> Status:
    """A `Status` with `status: Success` (binding, delete of kinds that do not return the object)."""
    body: Status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(name: str, resource: str, group: str) -> StatusDetails:
    out: StatusDetails = {"name": name} if name else {}
    if group:
        out["group"] = group
    out["kind"] = resource
    return out


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(resource, group)} "{name}" not found', _details(name, resource, group)
    )


def resource_not_found() -> ApiError:
    """An unknown path or resource type (what `kubectl get foos` sees for a type the server lacks)."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists', _details(name, resource, group)
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    message = f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(name, resource, group))


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: str, name: str, group: str = "") -> ApiError:
    """The resourceVersion precondition of an update or patch failed."""
    return conflict(resource, name, MODIFIED, group)


def invalid(kind: str, name: str, causes: Sequence[Cause], group: str = "") -> ApiError:
    """422 Invalid: `Pod "x" is invalid: spec.containers: Required value` (several causes in brackets)."""
    rendered = [cause.render() for cause in causes]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    details = _details(name, kind, group)
    details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    return ApiError(422, "Invalid", f'{_qualified(kind, group)} "{name}" is invalid: {text}', details)


def unprocessable(message: str) -> ApiError:
    """A 422 without a kind (a JSON patch that does not apply)."""
    return ApiError(422, "Invalid", message, {})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message, {})


def forbidden(resource: str, name: str, why: str, group: str = "") -> ApiError:
    message = f'{_qualified(resource, group)} "{name}" is forbidden: {why}'
    return ApiError(403, "Forbidden", message, _details(name, resource, group))


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def expired(message: str) -> ApiError:
    """410 Gone with reason Expired: a watch or continue token older than the retained history."""
    return ApiError(410, "Expired", message, {})


def too_old_resource_version(requested: int, oldest: int) -> ApiError:
    return expired(f"too old resource version: {requested} ({oldest})")


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format ({content_type or 'none'}) - "
        f"accepted media types include: {', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message, {})


def not_acceptable(accept: str) -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        f"the server was unable to respond with a content type that the client supports ({accept})",
        {},
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {})


def field_invalid(path: str, value: object, why: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {why}", path)


def field_required(path: str, why: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {why}" if why else ""), path)


def field_forbidden(path: str, why: str) -> Cause:
    return Cause("FieldValueForbidden", f"Forbidden: {why}", path)


def field_unsupported(path: str, value: object, allowed: Sequence[str]) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    options = ", ".join(f'"{a}"' for a in allowed)
    return Cause("FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {options}", path)
