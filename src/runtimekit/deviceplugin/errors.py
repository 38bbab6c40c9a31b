"""The device plugin's refusals: a code the gRPC adapter maps to a status, and the reason kubelet shows.

kubelet puts the message of a failed Allocate on the pod (`Allocate failed due to <message>, which
is unexpected`), so messages name the pod, container, resource and what to do.
"""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class PluginError(Exception):
    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
