"""Refusals with a code, and the one decorator that turns them into gRPC statuses.

A service (the node runtime, the device plugin) refuses a request by raising `ServiceError(code,
message)`; the message is for people (kubelet shows the device plugin's on the pod). Its gRPC
adapter wraps every method with `@grpc_method(component)`: a `ServiceError` becomes the status of
its code with its message; any other exception is a bug or broken infrastructure, so it is logged
with its traceback and answered INTERNAL naming the component, the method and the exception. The
server keeps serving either way.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import grpc

log = logging.getLogger(__name__)
Reply = TypeVar("Reply")


class Code(StrEnum):
    """The gRPC status codes a service refuses with (their names are grpc.StatusCode's)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"  # the request is malformed; the same request will fail again
    NOT_FOUND = "NOT_FOUND"  # it names something that does not exist
    FAILED_PRECONDITION = "FAILED_PRECONDITION"  # not in the present state (disabled, unhealthy, ...)
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # it would over-commit
    UNAVAILABLE = "UNAVAILABLE"  # not now (state not recovered, a dependency down): retry later
    INTERNAL = "INTERNAL"  # a dependency answered something it should not have


class ServiceError(Exception):
    """A request the service refuses; the service stays healthy and keeps serving."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> grpc.StatusCode:
        return grpc.StatusCode[self.code.value]


def grpc_method(component: str, log_refusals: bool = False) -> Callable[[Callable[..., Reply]], Callable[..., Reply]]:
    """Decorate a servicer method `(self, request, context) -> reply`; see the module docstring.
    `log_refusals` also logs each refusal (a warning), for services whose caller hides it."""

    def decorate(method: Callable[..., Reply]) -> Callable[..., Reply]:
        @functools.wraps(method)
        def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Reply:
            try:
                return method(self, request, context)
            except ServiceError as exc:
                if log_refusals:
                    log.warning("%s %s refused: %s", component, method.__name__, exc.message)
                context.abort(exc.status, exc.message)
            except Exception as exc:
                log.exception("%s %s failed", component, method.__name__)
                context.abort(grpc.StatusCode.INTERNAL, f"{component} {method.__name__}: {type(exc).__name__}: {exc}")
            raise AssertionError("context.abort returned")  # pragma: no cover

        return wrapper

    return decorate
