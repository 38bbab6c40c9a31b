"""Errors of the API-server access layer, free of any client library so every component can catch them.

`runtimekit.kube` implementations translate their client's exceptions into these; fakes in tests
raise them directly. `retryable` says whether trying again later may help.
"""

from __future__ import annotations


class KubeError(Exception):
    """A call to the API server failed."""

    retryable = True


class ConflictError(KubeError):
    """409: the object changed since it was read (a resourceVersion precondition failed)."""


class NotFoundError(KubeError):
    """404: the object does not exist (any more)."""

    retryable = False


class UnavailableError(KubeError):
    """The API server could not be reached or answered 5xx."""
