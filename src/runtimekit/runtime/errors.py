"""The runtime service's refusals: a code the gRPC adapter maps to a status, and a message for people.

Codes (docs/runtime-api.md): INVALID_ARGUMENT (malformed request: missing pod identity, negative
amount, share bigger than the GPU), NOT_FOUND (unknown GPU or MIG device), RESOURCE_EXHAUSTED (it
would over-commit a GPU), FAILED_PRECONDITION (the node is disabled, the GPU is unhealthy or in MIG
mode, the container holds a different allocation, fault injection on real GPUs), UNAVAILABLE (the
allocation state is not recovered yet; retry later).
"""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAVAILABLE = "UNAVAILABLE"


class ServiceError(Exception):
    """A request the runtime refuses; the runtime stays healthy and keeps serving."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
